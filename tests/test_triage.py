"""Triage reads: `find` on the server against a Python oracle (fnmatch), a scan that
stays right while the queue moves, `signature` by a table of examples, and `errors`
against a pandas grouping of the same rows. Both backends; the function executor
and a read-only session where the script runs as FCALL_RO."""

from __future__ import annotations

import fnmatch
import random
import re
import threading
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
import redis
from dead_rows import BIG, dead_row, long_dead
from dead_rows import Q as Q_reads
from harm import ScriptReads, bounded, commands_sent, replies, written_out
from helpers import dump, open_conn, server_for, server_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import decoding, defaults, frames, jobs, scripts, triage
from emq_notebook.defaults import BYTE_BUDGET, MAX_BUDGET
from emq_notebook.errors import BadInput, InvalidName
from emq_notebook.keyspace import base
from emq_notebook.widgets import Dashboard

Q = "tri"
DEAD = f"emq:{{{Q}}}:dead"


def put_dead(conn, rows: dict[str, tuple[str, str]], score=lambda i: 1_000 + i) -> list[str]:
    """Rows written straight to the keyspace (the contract's fields), all in dead."""
    pipe = conn.client.pipeline(transaction=False)
    for i, (job_id, (error, payload)) in enumerate(rows.items()):
        pipe.hset(
            f"emq:{{{Q}}}:job:{job_id}",
            mapping={
                "payload": decoding.wire(payload),
                "last_error": decoding.wire(error),
                "state": "dead",
                "attempts": str(i % 4),
                "failures": "1",
                "stalled": "0",
                "priority": "0",
                "created_at": str(5_000 + i),
            },
        )
        pipe.zadd(DEAD, {job_id: score(i)})
    pipe.execute()
    return list(rows)


def clear(conn) -> None:
    keys = list(conn.client.scan_iter(match=f"emq:{{{Q}}}:*", count=1000))
    if keys:
        conn.client.delete(*keys)


# -- globs against fnmatch.fnmatchcase -------------------------------------------------


def canonical(text: str) -> str:
    """Text as the server hands it back: undecodable bytes are surrogates, the rest UTF-8."""
    return text.encode("utf-8", decoding.ERRORS).decode("utf-8", decoding.ERRORS)


MAGIC = "().%+-*?[^$]!"
ALPHABET = st.sampled_from(list(MAGIC + "ab AZ09_\\/:\n\t\0é€😀") + ["\udcff", "\udc80", "\udcc3", "\udca9"])
FIELD = st.text(ALPHABET, max_size=12).map(canonical)


@st.composite
def glob_from(draw, field: str) -> str:
    """A glob cut from `field`: some characters kept, some turned into `?`, `*`, a class
    (plain, negated, ranged) or a random glob character; or a glob of magic alone."""
    if draw(st.integers(0, 5)) == 0:
        return draw(st.text(ALPHABET, max_size=8))
    out = []
    for ch in field:
        how = draw(st.integers(0, 9))
        if how <= 4:
            out.append(ch)
        elif how == 5:
            out.append("?")
        elif how == 6:
            out.append("*")
        elif how == 7:
            other = draw(st.text(ALPHABET, max_size=3))
            out.append("[" + draw(st.sampled_from(["", "!", "^"])) + other + ch + "]")
        elif how == 8:
            lo, hi = sorted([ch, draw(ALPHABET)])
            out.append(f"[{draw(st.sampled_from(['', '!']))}{lo}-{hi}]")
        else:
            out.append(draw(st.sampled_from(list(MAGIC))))
    return "".join(out)


@st.composite
def case(draw):
    fields = draw(st.lists(st.tuples(FIELD, FIELD), min_size=1, max_size=8))
    which = draw(st.sampled_from(["error", "payload"]))
    source = draw(st.sampled_from(fields))[0 if which == "error" else 1]
    return fields, which, draw(glob_from(source)), draw(st.integers(1, 4))


on_a_backend = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@on_a_backend
@given(case())
def test_find_agrees_with_fnmatchcase(conn, data):
    fields, which, glob, budget = data
    clear(conn)
    ids = put_dead(conn, {f"j_{i:02d}": f for i, f in enumerate(fields)})
    got = triage.find(conn, Q, budget=budget, **{which: glob})
    column = 0 if which == "error" else 1
    expected = [i for i, f in zip(ids, fields, strict=True) if fnmatch.fnmatchcase(f[column], glob)]
    assert list(got.index) == expected, (glob, fields)


# the server's matcher alone, with work enough to decide any of these
MATCH = "".join(
    (scripts.lua_dir() / "includes" / f"{n}.lua").read_text() for n in ("utf8_char", "glob_spec", "glob")
) + ("\nlocal said = glob_matches(ARGV[1], glob_of(ARGV[2]), {steps = 1e9})\nreturn said and 1 or 0")


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=10), st.data())
def test_the_server_matcher_lets_through_every_match(text, data):
    """The matcher alone, on ASCII text and past it: what fnmatch matches, the Lua
    matcher matches, and on ASCII text nothing more (tried on the embedded server's Lua)."""
    text = canonical(text)
    glob = data.draw(glob_from(text))
    conn = emq.connect(embedded="fake")
    spec = triage.glob_spec(glob)
    said = conn.client.eval(MATCH, 0, decoding.wire(text), decoding.wire(spec))
    if fnmatch.fnmatchcase(text, glob):
        assert said == 1, (text, glob, spec)
    elif text.isascii():
        assert said == 0, (text, glob, spec)  # exact on ASCII text


@pytest.mark.parametrize(
    "glob, text, expected",
    [
        ("refused by billing:*", "refused by billing: caf\u00e9 'x'", True),
        ("refused by billing:*", "refus\u00e9 by billing: x", False),
        ("*by billing*", "\u00fcber by billing \u00e9", True),
        ("*by*ling", "\u00e9 by bil\u00e9 ling", True),
        ("*by*ling", "\u00e9 by bil\u00e9 lin\u00e9", False),
        ("a*\u00e9", "ab\u00e9", True),
        ("a*\u00e9", "ab\u00e8", False),
        ("*\u20ac*", "x\u20ac\u20acx", True),
        ("?\u00e9", "\u00e9\u00e9", True),
        ("??", "\u20ac", False),
        ("[\u00e0-\u00ff]*", "\u00e9t\u00e9", True),
        ("[!\u00e0-\u00ff]*", "\u00e9t\u00e9", False),
        ("a?", "a\udcff", True),
        ("a[\udc80-\udcff]", "a\udcc3", True),
        ("a[\udc80-\udcff]", "a\u00e9", False),
    ],
)
def test_the_matcher_is_exact_on_utf8_text_for_a_glob_of_characters(conn, glob, text, expected):
    """`?` and a class read one character as Python decodes it (a byte that is no part of
    a well-formed sequence is one of its own), and a literal compares whole characters:
    so on well-formed text, and for a glob naming no undecodable byte as a literal, the
    server's answer is fnmatch's, with no second look needed."""
    assert fnmatch.fnmatchcase(text, glob) is expected
    said = conn.client.eval(MATCH, 0, decoding.wire(text), decoding.wire(triage.glob_spec(glob)))
    assert said == int(expected), (glob, text)


GLOBS = [  # (glob, text, fnmatch's answer): Lua's magic characters taken as written
    ("50%", "50%", True),
    ("a.b", "axb", False),
    ("(x)", "(x)", True),
    ("a+", "aa", False),
    ("a-b", "a-b", True),
    ("$5", "$5", True),
    ("^up", "^up", True),
    ("[^a]", "^", True),
    ("[^a]", "b", False),
    ("[!a]", "b", True),
    ("[!a]", "a", False),
    ("[]]", "]", True),
    ("[!]]", "]", False),
    ("[a-c]x", "bx", True),
    ("[c-a]", "b", False),
    ("[", "[", True),
    ("a[", "a[", True),
    ("*.log", "x.log", True),
    ("*.log", "x.log.1", False),
    ("?", "é", True),
    ("??", "é", False),
    ("[é]", "é", True),
    ("[!é]", "e", True),
    ("[!é]", "é", False),
    ("SMTP 5?? *", "SMTP 550 mailbox", True),
    ("*a*a*a*b", "a" * 3000, False),
    ("", "", True),
    ("*", "", True),
    ("a\0b", "a\0b", True),
    ("x%dy", "x5y", False),
]


@pytest.mark.parametrize(("glob", "text", "matches"), GLOBS)
def test_globs_as_fnmatch_reads_them(conn, glob, text, matches):
    assert fnmatch.fnmatchcase(text, glob) is matches  # the table is fnmatch's
    put_dead(conn, {"j_1": (text, text)})
    assert list(triage.find(conn, Q, error=glob).index) == (["j_1"] if matches else [])
    assert list(triage.find(conn, Q, payload=glob).index) == (["j_1"] if matches else [])


# -- filters, states, lanes, frames ------------------------------------------------------


def staged(conn) -> dict[str, str]:
    """Jobs through the real transitions: dead with two errors, scheduled (a retry), a
    lane's pending job, a flat pending one."""
    made = {}
    for i in range(5):
        made[f"j_d{i}"] = jobs.enqueue(conn, Q, f'{{"to": "u{i}@example.com"}}', id=f"j_d{i}", max_attempts=1)
        jobs.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, f"j_d{i}", "SMTP 550 mailbox unavailable" if i % 2 else "timeout after 30s")
    jobs.enqueue(conn, Q, '{"to": "r@example.com"}', id="j_retry", max_attempts=3)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_retry", "SMTP 421 try later")
    jobs.enqueue(conn, Q, '{"to": "g@example.com"}', id="j_lane", group="acme")
    jobs.enqueue(conn, Q, '{"to": "p@example.com"}', id="j_flat")
    return made


def test_find_filters_and_frames(conn):
    staged(conn)
    smtp = triage.find(conn, Q, error="SMTP 5*")
    assert list(smtp.index) == ["j_d1", "j_d3"]
    snap = frames.snapshot(conn, Q, "dead")
    pd.testing.assert_frame_equal(smtp, snap.loc[["j_d1", "j_d3"]])
    both = triage.find(conn, Q, state=("dead", "schedule"), error="SMTP*")
    assert list(both.index) == ["j_d1", "j_d3", "j_retry"]
    assert list(both["state"]) == ["dead", "dead", "schedule"]
    assert list(triage.find(conn, Q, state="pending").index) == ["j_flat", "j_lane"]
    lane = triage.find(conn, Q, state="all", group="acme")
    assert list(lane.index) == ["j_lane"] and lane.loc["j_lane", "group"] == "acme"
    assert list(triage.find(conn, Q, payload='{"to": "u[24]@*"}').index) == ["j_d2", "j_d4"]
    assert list(triage.find(conn, Q, state="all", min_attempts=1).index) == [
        "j_retry",
        "j_d0",
        "j_d1",
        "j_d2",
        "j_d3",
        "j_d4",
    ]  # pending, active, schedule, dead
    assert triage.find(conn, Q, state="all", min_attempts=2).empty
    assert list(triage.find(conn, Q, limit=2).index) == ["j_d0", "j_d1"]
    assert list(triage.find(conn, Q, limit=None, budget=1).index) == [f"j_d{i}" for i in range(5)]


def test_created_bounds(conn):
    put_dead(conn, {f"j_{i}": ("e", "p") for i in range(6)})  # created_at 5000 .. 5005
    assert list(triage.find(conn, Q, created_after=5_002).index) == ["j_2", "j_3", "j_4", "j_5"]
    assert list(triage.find(conn, Q, created_before=5_002).index) == ["j_0", "j_1"]
    assert list(triage.find(conn, Q, created_after=5_001, created_before=5_003).index) == ["j_1", "j_2"]
    conn.client.hdel(f"emq:{{{Q}}}:job:j_3", "created_at")  # a foreign row
    assert "j_3" not in triage.find(conn, Q, created_after=0).index
    assert "j_3" in triage.find(conn, Q).index


def test_ghosts_and_absent_fields_never_match(conn):
    put_dead(conn, {"j_1": ("boom", "{}")})
    conn.client.zadd(DEAD, {"j_ghost": 1})
    conn.client.hdel(f"emq:{{{Q}}}:job:j_1", "last_error")
    assert list(triage.find(conn, Q).index) == ["j_1"]
    assert triage.find(conn, Q, error="*").empty


def test_a_lane_name_outside_the_gate_is_read_as_it_is(conn):
    """Lane names another node wrote (`tenant 42`, "") fail the name gate, yet find and
    errors read their backlogs as snapshot does: a name read from the server is addressed
    as it is (the `{q}` hash tag comes first in the key)."""
    jobs.enqueue(conn, Q, "{}", id="j_ok", group="acme")
    for lane, job_id in (("tenant 42", "j_t42"), ("", "j_empty")):
        conn.client.hset(
            f"emq:{{{Q}}}:job:{job_id}",
            mapping={"payload": "{}", "group": lane, "attempts": "0", "last_error": f"boom {job_id}"},
        )
        conn.client.zadd(f"emq:{{{Q}}}:g:{lane}:pending", {job_id: 0})
        conn.client.sadd(f"emq:{{{Q}}}:groups", lane)
    expected = {"j_ok", "j_t42", "j_empty"}
    for state in ("pending", "all", ("dead", "pending")):
        assert set(triage.find(conn, Q, state=state).index) == expected, state
    lanes = triage.find(conn, Q, state="pending", error="boom*")
    assert dict(lanes["group"]) == {"j_empty": "", "j_t42": "tenant 42"}
    assert triage.errors(conn, Q, "all")["count"].to_dict() == {"": 1, "boom j_t<num>": 1, "boom j_empty": 1}
    assert set(frames.snapshot(conn, Q, "pending").index) == expected


def test_find_never_returns_a_member_with_no_row(conn):
    put_dead(conn, {"j_1": ("boom", "{}")})
    conn.client.zadd(DEAD, {"j_ghost": 999, "j_ghost2": 5_000})
    for how in (
        {},
        {"min_attempts": 0},
        {"created_after": 0},
        {"created_before": 10**12},
        {"error": "*"},
        {"min_attempts": 0, "budget": 1},
    ):
        assert list(triage.find(conn, Q, **how).index) == ["j_1"], how


def test_bad_arguments_are_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for kwargs in (
        {"state": "finished"},
        {"state": ()},
        {"budget": 0},
        {"limit": 0},
        {"min_attempts": -1},
        {"created_after": "yesterday"},
        {"error": 5},
        {"budget": True},
    ):
        with pytest.raises(BadInput):
            triage.find(nowhere, Q, **kwargs)
    for kwargs in ({"group": "a:b"},):
        with pytest.raises(InvalidName):
            triage.find(nowhere, Q, **kwargs)
    with pytest.raises(InvalidName):
        triage.find(nowhere, "bad{name}")
    with pytest.raises(BadInput):
        triage.errors(nowhere, Q, budget=0)
    for call in (triage.find, triage.errors):
        with pytest.raises(BadInput, match=f"{MAX_BUDGET:,}"):
            call(nowhere, Q, budget=MAX_BUDGET + 1)
    with pytest.raises(BadInput, match="1,000"):
        triage.find(nowhere, Q, error="*" * 1_001)


# -- a scan while the queue moves ----------------------------------------------------------


def test_a_scan_while_members_come_and_go_between_calls(conn):
    """Between every two calls, members leave (the cursor's own member among them) and
    arrive (at the cursor's score too): none is returned twice, none that stayed is missed."""
    rng = random.Random(7)
    ids = put_dead(
        conn, {f"j_{i:04d}": ("boom", "{}") for i in range(600)}, score=lambda i: 1_000 + i // 25
    )  # runs of equal scores
    stayed, arrived, removed = set(ids), set(), set()
    real = conn.run

    def moving(name, keys, args=(), **kw):
        cursor = args[1] if name == "find" else ""
        for _ in range(3):
            victim = cursor if cursor and rng.random() < 0.5 else rng.choice(ids)
            if conn.client.zrem(DEAD, victim):
                removed.add(victim)
                stayed.discard(victim)
        for _ in range(2):
            new = f"j_n{len(arrived):04d}"
            score = float(args[0]) if args and args[0] else 1_000
            conn.client.hset(
                f"emq:{{{Q}}}:job:{new}",
                mapping={
                    "last_error": "boom",
                    "payload": "{}",
                    "priority": "0",
                    "attempts": "1",
                    "failures": "1",
                    "stalled": "0",
                },
            )
            conn.client.zadd(DEAD, {new: score + rng.choice([-1, 0, 0, 1])})
            arrived.add(new)
        return real(name, keys, args, **kw)

    conn.run = moving
    got = list(triage.find(conn, Q, error="boom", limit=None, budget=7).index)
    assert len(got) == len(set(got))
    assert stayed <= set(got)
    assert set(got) <= set(ids) | arrived
    in_order = [i for i in got if i in stayed]
    assert in_order == sorted(in_order)  # set order: score, then id


def test_a_scan_while_another_client_moves_jobs(conn, connect_as):
    """A second client reprocesses dead jobs and kills others again while the scan runs."""
    for i in range(400):
        jobs.enqueue(conn, Q, "{}", id=f"j_{i:04d}", max_attempts=1)
    for i in range(400):
        jobs.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, f"j_{i:04d}", "boom")
    touched: set[str] = set()
    other = connect_as()
    stop = threading.Event()

    def mover():
        rng = random.Random(3)
        while not stop.is_set():
            victim = f"j_{rng.randrange(400):04d}"
            touched.add(victim)
            try:
                jobs.reprocess_job(other, Q, victim)
                got = jobs.claim(other, Q, 60_000)
                if got:
                    jobs.fail(other, Q, got.id, "boom")
            except emq.Refused:
                pass

    t = threading.Thread(target=mover)
    t.start()
    try:
        got = list(triage.find(conn, Q, error="boom", limit=None, budget=5).index)
    finally:
        stop.set()
        t.join()
    assert len(got) == len(set(got))
    assert {f"j_{i:04d}" for i in range(400)} - touched <= set(got)
    assert touched, "the mover ran"


# -- executors and sessions ----------------------------------------------------------------


def test_function_executor_and_read_only_session(conn, backend, request):
    staged(conn)
    srv = server_for(backend, request)
    url = None if backend == "fake" else server_url(backend, srv)
    before = dump(conn)
    for executor in ("script", "function"):
        ro = emq.connect(url, embedded="fake" if url is None else None, executor=executor, read_only=True)
        sent: list[str] = []

        def record(*a, sent=sent, real=ro.client.execute_command, **k):
            sent.append(str(a[0]).upper())
            return real(*a, **k)

        ro.client.execute_command = record
        pd.testing.assert_frame_equal(
            triage.find(ro, Q, error="SMTP*", state="all"), triage.find(conn, Q, error="SMTP*", state="all")
        )
        pd.testing.assert_frame_equal(triage.errors(ro, Q), triage.errors(conn, Q))
        if executor == "function":
            assert "FCALL_RO" in sent and "FCALL" not in sent
    assert dump(conn) == before


# -- signatures -------------------------------------------------------------------------------

SIGNATURES = [
    ("SMTP 550 mailbox unavailable", "SMTP <num> mailbox unavailable"),
    ("timeout after 30.5s", "timeout after <num>s"),
    ("user 'ana@example.com' not found", "user <str> not found"),
    ('key "a b 12" missing', "key <str> missing"),
    ("it's 3 o'clock", "it<str>clock"),
    ("request 123e4567-e89b-12d3-a456-426614174000 failed", "request <hex> failed"),
    ("REQUEST 123E4567-E89B-12D3-A456-426614174000", "REQUEST <hex>"),
    ("trace deadbeef1 at 0x7f3a2c1b9e00", "trace <hex> at <num>x<hex>"),
    ("deadbeefcafe has no digit", "deadbeefcafe has no digit"),
    ("abc1234 is seven", "abc<num> is seven"),
    ("sha 3f2a9c0d1e", "sha <hex>"),
    ("   many\t\tspaces \n here  ", "many spaces here"),
    ("retry 1/3, 2/3", "retry <num>/<num>, <num>/<num>"),
    ("v1.2.3", "v<num>.<num>"),
    ("-42 below zero", "-<num> below zero"),
    ("user42 and ٣", "user<num> and ٣"),
    ("", ""),
    ("x" * 250, "x" * 200),
    ("ok " + "1 " * 150, ("ok" + " <num>" * 150)[:200]),
]


@pytest.mark.parametrize(("text", "expected"), SIGNATURES)
def test_signature(text, expected):
    assert triage.signature(text) == expected


ERROR_TEXT = (
    st.lists(
        st.one_of(
            st.text(st.sampled_from(list("0123456789abcdefABCXYZ-'\" .\t_<>") + ["é", "\udcff"]), max_size=8),
            st.uuids().map(str),
            st.uuids().map(lambda u: str(u).upper()[:-1]),
            st.from_regex(r"[0-9a-fA-F]{6,10}", fullmatch=True),
            st.sampled_from(["'", '"', "1.5", "..", "-", " ", "1.2.3", "e1", "deadbeef", "deadbeef1"]),
            # a UUID with no digit (found from its dashes: it holds no digit to find it by)
            st.sampled_from(["abcdefab-abcd-abcd-abcd-abcdefabcdef", "ABCDEFAB-ABCD-ABCD-ABCD-ABCDEFABCDEF"]),
        ),
        max_size=8,
    )
    .map("".join)
    .map(canonical)
)


def assert_grouped_by_signature(conn, texts: list[str], budget: int) -> None:
    """`texts` as dead rows, then errors() counts each signature as often as Python does."""
    clear(conn)
    put_dead(conn, {f"j_{i:02d}": (text, "{}") for i, text in enumerate(texts)})
    got = triage.errors(conn, Q, budget=budget)["count"].to_dict()
    expected: dict[str, int] = {}
    for text in texts:
        expected[triage.signature(text)] = expected.get(triage.signature(text), 0) + 1
    assert got == expected, texts


@on_a_backend
@given(st.lists(ERROR_TEXT, min_size=1, max_size=12), st.integers(1, 5))
def test_the_errors_script_groups_as_the_signature_does(conn, texts, budget):
    """The @errors script's keys against Python: rows grouped by signature, counted right."""
    assert_grouped_by_signature(conn, texts, budget)


def test_errors_agree_with_pandas_over_the_snapshot(conn):
    rng = random.Random(11)
    shapes = ["SMTP {n} mailbox unavailable", "timeout after {n}ms", "no user '{w}'", "req {h} failed"]
    rows = {}
    for i in range(300):
        shape = rng.choice(shapes)
        rows[f"j_{i:03d}"] = (
            shape.format(n=rng.randrange(1000), w=rng.choice("abc") * 3, h=f"{rng.getrandbits(64):016x}"),
            "{}",
        )
    put_dead(conn, rows, score=lambda i: 10_000 + rng.randrange(50))
    conn.client.hdel(f"emq:{{{Q}}}:job:j_000", "last_error")
    got = triage.errors(conn, Q, budget=13)
    snap = frames.snapshot(conn, Q, "dead")
    sig = snap["last_error"].fillna("").map(triage.signature)
    scores = pd.Series(dict(conn.client.zrange(DEAD, 0, -1, withscores=True)))
    assert got["count"].to_dict() == sig.value_counts().to_dict()
    assert list(got["count"]) == sorted(got["count"], reverse=True)
    for s, row in got.iterrows():
        members = sig[sig == s].index
        assert row["first_seen"] == pd.to_datetime(scores[members].min(), unit="ms", utc=True)
        assert row["last_seen"] == pd.to_datetime(scores[members].max(), unit="ms", utc=True)
        assert row["sample_id"] in members
        assert triage.signature("" if pd.isna(row["sample_error"]) else row["sample_error"]) == s
    assert got.loc["", "count"] == 1 and pd.isna(got.loc["", "sample_error"])


def test_errors_of_a_moving_set_count_each_stayer_once(conn):
    ids = put_dead(conn, {f"j_{i:03d}": (f"E{i % 5} code {i}", "{}") for i in range(200)})
    real = conn.run
    calls = []

    def moving(name, keys, args=(), **kw):
        calls.append(name)
        if len(calls) % 2 == 0:
            conn.client.zrem(DEAD, ids[len(calls)])  # one leaves, it was counted or not
        return real(name, keys, args, **kw)

    conn.run = moving
    got = triage.errors(conn, Q, budget=9)
    total = int(got["count"].sum())
    left = len(ids) - conn.client.zcard(DEAD)
    assert len(ids) - left <= total <= len(ids)


# -- @errors: a text keyed in one pass, texts of one shape many times over -----------------

# the parts a family keeps variable, each drawn afresh for every text of the family
VARIABLE = {
    "number": st.from_regex(r"[0-9]{1,9}", fullmatch=True),
    "decimal": st.from_regex(r"[0-9]{1,8}\.[0-9]{1,8}", fullmatch=True),
    "dotted": st.from_regex(r"-?[0-9]{1,3}([.-][0-9]{1,8}){1,3}-?", fullmatch=True),
    "uuid": st.one_of(
        st.uuids().map(str),
        st.uuids().map(lambda u: str(u).upper()),
        st.from_regex(r"[a-fA-F]{8}-[a-f]{4}-[a-f]{4}-[a-f]{4}-[a-f]{12}", fullmatch=True),
    ),
    # near a UUID: groups one off in length (36 long or not), or of any length
    "uuidish": st.one_of(
        st.uuids().map(str),
        st.sampled_from(["9-3-4-4-12", "7-5-4-4-12", "8-4-4-5-11", "8-4-3-5-12"]).flatmap(
            lambda g: st.tuples(
                *(st.from_regex(rf"[0-9a-f]{{{n}}}", fullmatch=True) for n in g.split("-"))
            ).map("-".join)
        ),
        st.from_regex(
            r"[0-9a-fA-F]{7,9}-[0-9a-f]{3,5}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{11,13}", fullmatch=True
        ),
        st.from_regex(r"[0-9a-f]{1,12}(-[0-9a-f]{1,12}){2,4}", fullmatch=True),
    ),
    # a hex run with digits, with none, or of digits only
    "hex": st.one_of(
        st.from_regex(r"[0-9a-fA-F]{6,12}", fullmatch=True),
        st.from_regex(r"[a-fA-F]{6,12}", fullmatch=True),
        st.from_regex(r"[0-9]{6,12}", fullmatch=True),
    ),
    "quoted": st.tuples(st.sampled_from("'\""), st.text(st.sampled_from(list("ab 1'\"-.é")), max_size=5)).map(
        lambda q: q[0] + q[1].replace(q[0], "") + q[0]
    ),
}
# literal parts: letters that are hex digits and letters that are not, Lua's magic
# characters, a quote now and then (one left open: that text has no family)
LITERAL = st.text(
    st.sampled_from(list("ghkxyz abcdefABC:,;/()%+*?[]^$.-\t") + ["é", "'", '"']), min_size=1, max_size=6
)
SKELETON = st.lists(
    st.one_of(
        LITERAL.map(lambda t: ("literal", t)),
        st.sampled_from(sorted(VARIABLE)).map(lambda k: ("variable", k)),
    ),
    min_size=1,
    max_size=6,
)


@st.composite
def families(draw) -> list[str]:
    """Texts in families: each family one skeleton, its variable parts drawn afresh for
    each text; the families shuffled together."""
    texts = []
    for skeleton in draw(st.lists(SKELETON, min_size=1, max_size=3)):
        for _ in range(draw(st.integers(2, 6))):
            texts.append(
                "".join(part if how == "literal" else draw(VARIABLE[part]) for how, part in skeleton)
            )
    return [canonical(t) for t in draw(st.permutations(texts))]


@on_a_backend
@given(families(), st.integers(1, 6))
def test_texts_of_one_family_group_as_the_signature_does(conn, texts, budget):
    """Texts of one shape with their variable parts changed group as Python groups them:
    numbers 7 and 8 digits long, hex runs with and without a digit, UUIDs without one,
    quotes inside quotes, literal parts that run into the variable ones."""
    assert_grouped_by_signature(conn, texts, budget)


# the keyer alone: the keys of the texts in order, as one @errors step puts them
KEYS_OF = (scripts.lua_dir() / "includes" / "signature.lua").read_text() + (
    "\nlocal out = {}"
    "\nfor i = 2, #ARGV do out[i - 1] = signature_key(ARGV[i], tonumber(ARGV[1])) end"
    "\nreturn out"
)
PRINTABLE = re.compile("[!-~]")


def assert_keyed_as_python(said: list[str], texts: list[str]) -> None:
    """Each Lua key is the text with `triage._replaced`'s replacements, or a head of it
    cut once it holds more than `SIGNATURE_LENGTH` printable ASCII characters (so its
    signature is the text's)."""
    for key, text in zip(said, texts, strict=True):
        whole = triage._replaced(text)
        if key != whole:
            assert whole.startswith(key), text
            assert len(PRINTABLE.findall(key)) > triage.SIGNATURE_LENGTH, text
            assert triage.signature(key) == triage.signature(text), text


def keys_of(conn, texts: list[str]) -> list[str]:
    return conn.client.eval(KEYS_OF, 0, triage.SIGNATURE_LENGTH, *(decoding.wire(t) for t in texts))


@on_a_backend
@given(st.one_of(st.lists(ERROR_TEXT, min_size=1, max_size=12), families()))
def test_the_lua_key_is_the_signatures_replacements(conn, texts):
    """The key of each text is the text with `triage._replaced`'s replacements (the
    signature before its whitespace is collapsed, stripped and cut), or a head of it
    with the same signature."""
    assert_keyed_as_python(keys_of(conn, texts), texts)


LONG_PART = st.one_of(
    ERROR_TEXT,
    st.text(st.sampled_from(list(" \t\n\x1c\x85\xa0é\udcffxyz")), min_size=50, max_size=300),
    st.text(st.sampled_from(list("0123456789 .-'")), min_size=50, max_size=300),
)
LONG_TEXT = st.lists(LONG_PART, min_size=1, max_size=10).map("".join).map(canonical)


@on_a_backend
@given(st.lists(LONG_TEXT, min_size=1, max_size=4))
def test_a_long_text_is_keyed_as_far_as_its_signature_shows(conn, texts):
    """A text is read until its key holds more than `SIGNATURE_LENGTH` printable ASCII
    characters, and no further: long runs of whitespace or bytes past ASCII (which the
    signature collapses or counts as characters) keep it reading."""
    assert_keyed_as_python(keys_of(conn, texts), texts)


def test_a_user_refused_reading_keys_by_pattern_gets_the_same_answers(valkey):
    """A user whose ACL names key patterns may not read keys by a pattern (SORT ... GET):
    @errors and @find then read each row on their own, and answer as for any user. Real
    Valkey only: fakeredis does not apply an ACL's key patterns to SORT's GET."""
    conn = open_conn("valkey", valkey)
    put_dead(conn, {f"j_{i:02d}": (f"SMTP {550 + i % 3} user '{i}'", f'{{"n": {i}}}') for i in range(30)})
    conn.client.hdel(f"emq:{{{Q}}}:job:j_04", "last_error")
    conn.client.zadd(DEAD, {"ghost": 1_010})  # a member with no row
    conn.client.execute_command("ACL", "SETUSER", "triage_ops", "on", ">pw", "~emq:*", "+@all")
    try:
        for executor in ("script", "function"):
            ops = emq.connect(f"redis://triage_ops:pw@127.0.0.1:{valkey.port}/0", executor=executor)
            with pytest.raises(redis.ResponseError, match="ACL"):
                ops.client.execute_command(
                    "SORT_RO", DEAD, "BY", "nosort", "GET", f"emq:{{{Q}}}:job:*->last_error"
                )
            pd.testing.assert_frame_equal(triage.errors(ops, Q, budget=7), triage.errors(conn, Q, budget=7))
            for how in ({"error": "SMTP 551*"}, {"error": "SMTP*", "payload": '*"n": 2*'}, {}):
                pd.testing.assert_frame_equal(
                    triage.find(ops, Q, budget=7, **how), triage.find(conn, Q, budget=7, **how)
                )
            found = triage.find(ops, Q, error="SMTP 551*")
            assert list(found.index) == [f"j_{i:02d}" for i in range(1, 30, 3) if i != 4]  # j_04 has no error
    finally:
        conn.client.execute_command("ACL", "DELUSER", "triage_ops")


def test_errors_and_find_on_a_cluster_read_a_step_by_pattern(cluster):
    """On a cluster, SORT's GET may read keys of the set's own slot: the queue's keys share
    one hash tag, so the step's one read is allowed there too."""
    conn = open_conn("cluster", cluster)
    put_dead(conn, {f"j_{i:02d}": (f"SMTP {550 + i % 3} user '{i}'", "{}") for i in range(12)})
    assert conn.client.execute_command(
        "SORT_RO", DEAD, "BY", "nosort", "GET", f"emq:{{{Q}}}:job:*->last_error"
    )
    assert triage.errors(conn, Q, budget=5)["count"].to_dict() == {"SMTP <num> user <str>": 12}
    assert list(triage.find(conn, Q, error="SMTP 552*", budget=5).index) == [
        f"j_{i:02d}" for i in range(2, 12, 3)
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(list("0123456789abcdef-'\" .\t*?[]<>numstrhx") + ["é"]), max_size=60))
def test_every_text_matches_the_glob_of_its_signature(text):
    assert fnmatch.fnmatchcase(text, triage.signature_glob(triage.signature(text)))


def test_find_by_signature(conn):
    put_dead(
        conn,
        {
            "j_1": ("SMTP 550 mailbox 'ana' gone", "{}"),
            "j_2": ("SMTP 421 mailbox 'bo' gone", "{}"),
            "j_3": ("SMTP 550 mailbox gone", "{}"),
            "j_4": ("SMTP 550 mailbox 'x' gone now", "{}"),
        },
    )
    sig = triage.signature("SMTP 550 mailbox 'ana' gone")
    assert list(triage.find(conn, Q, signature=sig).index) == ["j_1", "j_2"]
    assert list(triage.find(conn, Q, signature=sig, error="*421*").index) == ["j_2"]
    assert list(triage.find(conn, Q, signature=sig, limit=1, budget=1).index) == ["j_1"]
    with pytest.raises(BadInput):
        triage.find(conn, Q, signature=5)


# -- Do no harm, every field a search reads: `@find` (`triage.find`, `%emq find`, the dashboard's
# Jobs tab) and `@errors` (`triage.errors`) copy no field of a row over the step's bytes, whichever
# field another node made long: a `last_error` over it matches no error glob and counts under
# `triage.long_error_signature()`; a match's shown field over it is answered by its place and read
# as `frames.snapshot` reads it (`jobs.whole_field`, `decoding.not_read` over `MAX_WHOLE_FIELD`).
# Both backends, under the harness's watchdog (tests/harm.py); the bounds are made small here (a
# step's bytes 64 KB, a field read whole up to a byte budget and 64 KB) so a field over them stays
# small. Work is observed in the scripts' replies and (on Valkey) the bytes the server wrote, never
# timed.
Q_find_fields = "findfields"
P = f"emq:{{{Q_find_fields}}}:"
FIELD_find_fields = 64 << 10  # a search step's bytes, and the longest field it copies, here
WHOLE = BYTE_BUDGET + FIELD_find_fields  # the longest field read whole (MAX_WHOLE_FIELD), here
BETWEEN = 2 * FIELD_find_fields  # over the step's bound: read by itself (`@read_job`)
OVER = 2 * BYTE_BUDGET  # over WHOLE: never read


@pytest.fixture
def _small_bounds(monkeypatch):
    monkeypatch.setattr(defaults, "BYTE_BUDGET", FIELD_find_fields)
    monkeypatch.setattr(jobs, "MAX_WHOLE_FIELD", WHOLE)


def watched_out(conn, srv, call) -> tuple[Any, int | None]:
    """`harm.written_out` of `call()` run under the watchdog."""
    return written_out(conn, srv, lambda: bounded(call, srv))


def longest_text(calls: list) -> int:
    """The longest text any of these script replies holds, at any depth."""

    def texts(v: Any):
        if isinstance(v, str):
            yield len(v)
        elif isinstance(v, list):
            for x in v:
                yield from texts(x)

    return max((n for reply in calls for n in texts(reply)), default=0)


def dead(conn, error: str = "boom", **fields: str) -> str:
    """A dead job that failed with `error`, whose row another node gave `fields`."""
    job_id = jobs.enqueue(conn, Q_find_fields, '{"n": 1}', max_attempts=1)
    jobs.claim(conn, Q_find_fields)
    jobs.fail(conn, Q_find_fields, job_id, error)
    if fields:
        conn.client.hset(P + "job:" + job_id, mapping=fields)
    return job_id


@pytest.mark.usefixtures("_small_bounds")
def test_a_long_last_error_matches_no_error_glob_and_is_never_copied(harm):
    conn, srv = harm
    plain = [dead(conn, "boom 1"), dead(conn, "boom 2")]
    near = dead(conn, last_error="boom " + "n" * BETWEEN)
    far = dead(conn, last_error="boom " + "f" * OVER)
    calls = replies(conn, "find")
    frame, out = watched_out(conn, srv, lambda: triage.find(conn, Q_find_fields, error="boom*", limit=None))
    assert frame.index.tolist() == plain  # the long ones match no glob, though they would
    assert calls and longest_text(calls) < 1000
    if out is not None:
        assert out < 64_000
    # without a glob, the long rows are matches: their last_error read as a snapshot does
    frame = bounded(lambda: triage.find(conn, Q_find_fields, limit=None), srv)
    assert frame.index.tolist() == [*plain, near, far]
    assert frame.loc[near, "last_error"] == "boom " + "n" * BETWEEN
    assert frame.loc[far, "last_error"] == decoding.not_read(OVER + 5)
    assert longest_text(calls) <= FIELD_find_fields
    # nor does a long last_error have a signature a find narrows by
    assert (
        bounded(lambda: triage.find(conn, Q_find_fields, signature="boom <num>"), srv).index.tolist() == plain
    )


@pytest.mark.usefixtures("_small_bounds")
def test_errors_counts_a_long_last_error_under_its_fixed_signature(harm):
    conn, srv = harm
    dead(conn, "boom 1")
    dead(conn, "boom 2")
    first = dead(conn, last_error="x" * OVER)
    dead(conn, last_error="y" * (OVER + 1))
    calls = replies(conn, "errors")
    got, out = watched_out(conn, srv, lambda: triage.errors(conn, Q_find_fields))
    long = triage.long_error_signature()
    assert long == f"<over {FIELD_find_fields} bytes>"
    assert got["count"].to_dict() == {long: 2, "boom <num>": 2}
    assert got.loc[long, "sample_id"] == first
    assert got.loc[long, "sample_error"] == decoding.not_read(OVER, "BYTE_BUDGET")
    assert calls and longest_text(calls) < 1000
    if out is not None:
        assert out < 64_000


@pytest.mark.usefixtures("_small_bounds")
@pytest.mark.parametrize("field", ["progress", "group"])
def test_a_matchs_long_shown_field_is_read_as_a_snapshot_reads_it(harm, field):
    conn, srv = harm
    near = dead(conn, **{field: "n" * BETWEEN})
    far = dead(conn, **{field: "f" * OVER})
    plain = dead(conn)
    calls = replies(conn, "find")
    frame, out = watched_out(conn, srv, lambda: triage.find(conn, Q_find_fields, error="boom", limit=None))
    assert frame.index.tolist() == [near, far, plain]
    assert frame.loc[near, field] == "n" * BETWEEN  # read by itself, whole
    assert frame.loc[far, field] == decoding.not_read(OVER)
    assert frame.loc[far, "last_error"] == "boom" and frame.loc[far, "payload"] == '{"n": 1}'
    # the script answered both long fields by their places, their bytes left on the server
    assert calls and longest_text(calls) <= FIELD_find_fields
    place = triage.frames.FIELDS.index(field) + 1
    assert [row[2 + len(triage.frames.FIELDS) :] for reply in calls for row in reply[3:]] == [
        [place],
        [place],
        [],
    ]
    if out is not None:  # Valkey wrote the field read whole, never the one over WHOLE
        assert BETWEEN < out < BETWEEN + 64_000


@pytest.mark.usefixtures("_small_bounds")
@pytest.mark.parametrize(
    ("field", "filters"),
    [("group", {"group": "g"}), ("attempts", {"min_attempts": 0}), ("created_at", {"created_after": 0})],
)
def test_a_long_field_a_filter_reads_matches_nothing_and_is_never_read(harm, field, filters):
    conn, srv = harm
    dead(conn, **{field: field[0] * OVER})
    calls = replies(conn, "find")
    frame = bounded(lambda: triage.find(conn, Q_find_fields, limit=None, **filters), srv)
    assert frame.empty
    assert calls and longest_text(calls) < 1000
    if srv is not None:  # the row measured, no field of it read (HMGET, SORT_RO)
        counted = commands_sent(conn.client, lambda: triage.find(conn, Q_find_fields, **filters))
        assert counted["hstrlen"] == 1 and not {"hmget", "sort_ro", "sort"} & set(counted)


@pytest.mark.usefixtures("_small_bounds")
def test_the_jobs_tab_shows_a_long_field_by_its_length_and_filters_it_out(harm):
    conn, srv = harm
    plain = dead(conn, "boom 1")
    far = dead(conn, last_error="boom " + "f" * OVER, progress="p" * OVER)
    calls = replies(conn, "find")
    d = bounded(lambda: Dashboard(conn, auto=False, queue=Q_find_fields), srv)
    try:
        view = d.tab("Jobs")
        assert view.frame.index.tolist() == [far, plain]  # the newest death first
        assert view.frame.loc[far, "last_error"] == decoding.not_read(OVER + 5)
        assert view.frame.loc[far, "progress"] == decoding.not_read(OVER)
        view.error_glob.value = "boom*"
        _, out = watched_out(conn, srv, view.filter_button.click)
        assert view.frame.index.tolist() == [plain]
        if out is not None:
            assert out < 64_000
    finally:
        d.close()
    assert calls and longest_text(calls) <= FIELD_find_fields


# -- Do no harm, a long error found by its signature: `errors` counts every `last_error` over the
# step's bytes under `triage.long_error_signature()` without copying it, and
# `find(signature=long_error_signature())` finds exactly those rows the same way: each row's
# `last_error` measured on the server (HSTRLEN), never read there, so one step examines its budget
# of members whatever their texts hold. Both backends, under the harness's watchdog; the server's
# work is observed in the scripts' replies and the reading commands they ran, never timed.
Q_long_errors = "longerrors"
P_long_errors = base(Q_long_errors)
LONG = 2 * 10**6  # a 2 MB traceback another node wrote


def dead_long_errors(conn, job_id: str, error: str | None, score: int) -> str:
    """Dead row `job_id` that failed with `error` (None: no last_error), as @fail leaves it."""
    row = {"payload": "{}", "attempts": "1", "state": "dead"}
    if error is not None:
        row["last_error"] = decoding.wire(error)
    conn.client.hset(P_long_errors + "job:" + job_id, mapping=row)
    conn.client.zadd(P_long_errors + "dead", {job_id: score})
    return job_id


def not_utf8(size: int) -> str:
    """`size` bytes that are no UTF-8 text (as the client reads them: surrogates)."""
    head = "Traceback \udcff\udcfe ñ "
    return head + "\udcc3(" * ((size - decoding.wire_size(head)) // 2)


def seeded(conn) -> list[str]:
    """Short errors, 100 KB ones (one not UTF-8), a text of exactly a budget, one with
    no error, a member with no row, and among them the long ones: 2 MB (one not UTF-8)
    and one byte over the budget. Answers the long ones' ids, in set order."""
    long = []
    score = iter(range(1_000))
    for i in range(30):
        dead_long_errors(conn, f"s_{i:02d}", f"upstream timed out after {i} ms", next(score))
        if i == 3:
            dead_long_errors(conn, "m_1", "Traceback " + "t" * 100_000, next(score))
            long.append(dead_long_errors(conn, "l_1", "T" * LONG, next(score)))
        if i == 10:
            dead_long_errors(conn, "m_2", not_utf8(100_000), next(score))
            dead_long_errors(conn, "edge", "e" * BYTE_BUDGET, next(score))  # not over it
            long.append(dead_long_errors(conn, "l_2", not_utf8(LONG), next(score)))
        if i == 20:
            dead_long_errors(conn, "none", None, next(score))
            conn.client.zadd(P_long_errors + "dead", {"ghost": next(score)})
            long.append(dead_long_errors(conn, "l_3", "y" * (BYTE_BUDGET + 1), next(score)))
    return long


def test_find_by_the_long_error_signature_finds_the_rows_errors_counted_under_it(harm, monkeypatch):
    conn, srv = harm
    long = seeded(conn)
    sig = triage.long_error_signature()
    counted = bounded(lambda: triage.errors(conn, Q_long_errors), srv, what="errors")
    assert counted.loc[sig, "count"] == len(long) == 3
    assert counted.loc[sig, "sample_id"] == long[0]
    steps = replies(conn, "find")
    reads = ScriptReads(conn, srv, monkeypatch, "find")
    got = bounded(lambda: triage.find(conn, Q_long_errors, signature=sig, limit=None), srv, what="find")
    assert list(got.index) == long
    # shown as a snapshot shows them: each read whole by itself, after the search
    assert got.loc["l_1", "last_error"] == "T" * LONG
    assert got.loc["l_3", "last_error"] == "y" * (BYTE_BUDGET + 1)
    assert decoding.wire_size(got.loc["l_2", "last_error"]) == LONG
    # the search copied no text (its reading commands copied the matches' short fields),
    # and one step examined every member
    assert len(steps) == 1
    assert sum(reads.copied()) < 1_000
    # a glob beside it narrows nothing further: no long text matches a glob
    assert bounded(lambda: triage.find(conn, Q_long_errors, signature=sig, error="T*"), srv).empty
    # and the other signatures find theirs, as before
    short = triage.find(conn, Q_long_errors, signature="upstream timed out after <num> ms", limit=None)
    assert list(short.index) == [f"s_{i:02d}" for i in range(30)]


@pytest.mark.parametrize("filters", [{"min_attempts": 1}, {"min_attempts": 1, "created_after": 0}])
def test_the_long_error_signature_holds_beside_other_filters(harm, filters):
    """With three filters a row of ordinary size is measured whole on Valkey (its
    last_error read with it): such a row holds no long text, and is not found."""
    conn, srv = harm
    long = seeded(conn)
    for job_id in ["l_1", "l_2", "l_3", "s_00", "m_1", "edge"]:
        conn.client.hset(P_long_errors + "job:" + job_id, "created_at", "1714566896000")
    got = bounded(
        lambda: triage.find(
            conn, Q_long_errors, signature=triage.long_error_signature(), limit=None, **filters
        ),
        srv,
    )
    assert list(got.index) == long


# -- Do no harm, matching (issue 27, SPEC 11): the error texts and globs that froze, crashed or held
# a server for seconds go through `errors` and `find` in bounded calls, and the server still
# answers. Each call runs under `bounded` (a 30 s liveness bound that kills a frozen private server,
# and a PING after), on both backends. The answers are checked against Python's own `signature` and
# `fnmatch.fnmatchcase`.
Q_matching = "harm"
DEAD_matching = f"emq:{{{Q_matching}}}:dead"
ROOT = f"emq:{{{Q_matching}}}:"

LOG_LINES = [
    "2024-05-01T12:34:56.789Z upstream 10.20.30.40:6379 timed out after 1500 ms",
    "2024-05-01T12:35:07.123Z upstream 10.20.30.41:6379 refused connection",
]


def put_dead_matching(conn, texts: list[str | bytes], first: int = 1_000) -> list[str]:
    """One dead row a text (bytes go as they are), scored in order; their ids."""
    pipe = conn.client.pipeline(transaction=False)
    ids = []
    for i, text in enumerate(texts):
        job_id = f"j_{i:04d}"
        error = text if isinstance(text, bytes) else decoding.wire(text)
        pipe.hset(ROOT + "job:" + job_id, mapping={"last_error": error, "payload": "{}", "attempts": "1"})
        pipe.zadd(DEAD_matching, {job_id: first + i})
        ids.append(job_id)
    pipe.execute()
    return ids


def read(text: str | bytes) -> str:
    """A text as the toolkit reads it back (bytes that are not UTF-8 as surrogates)."""
    return text.decode("utf-8", decoding.ERRORS) if isinstance(text, bytes) else text


def signatures(texts: list[str | bytes]) -> dict[str, int]:
    """How many of `texts` have each signature, by Python's `triage.signature`."""
    counts: dict[str, int] = {}
    for text in texts:
        sig = triage.signature(read(text))
        counts[sig] = counts.get(sig, 0) + 1
    return counts


def errors_of(conn, srv) -> dict[str, int]:
    got = bounded(lambda: triage.errors(conn, Q_matching), srv, what="errors()")
    return got["count"].to_dict()


def found(conn, srv, **how) -> list[str]:
    got = bounded(lambda: triage.find(conn, Q_matching, limit=None, **how), srv, what=f"find({how})")
    return list(got.index)


def matching(ids: list[str], texts: list[str | bytes], glob: str) -> list[str]:
    return [i for i, t in zip(ids, texts, strict=True) if fnmatch.fnmatchcase(read(t), glob)]


# -- the error signature ------------------------------------------------------------------


def test_two_log_lines_group_in_errors_and_the_server_answers(harm):
    """Two ordinary log lines (a timestamp, an address, a port, a duration) group by
    their signatures: a pattern with runs like `%d%d?%d?` built from one of them would
    backtrack through ~10^10 paths on the other."""
    conn, srv = harm
    put_dead_matching(conn, LOG_LINES)
    assert errors_of(conn, srv) == signatures(LOG_LINES)
    assert set(signatures(LOG_LINES)) == {
        "<num>-<num>-<num>T<num>:<num>:<num>Z upstream <num>.<num>:<num> timed out after <num> ms",
        "<num>-<num>-<num>T<num>:<num>:<num>Z upstream <num>.<num>:<num> refused connection",
    }


def log_texts() -> list[str]:
    """Log-style error texts: timestamps, IPs and numbers in several formats, many times
    over with their numbers changed (one family each), and long ones."""
    rng = random.Random(27)
    texts = []
    for i in range(120):
        ms, port = rng.randrange(10_000), rng.randrange(1, 65_536)
        ip = ".".join(str(rng.randrange(256)) for _ in range(4))
        at = f"2024-05-{1 + i % 28:02d}T12:{i % 60:02d}:{i % 60:02d}.{ms % 1000:03d}Z"
        texts += [
            f"{at} upstream {ip}:{port} timed out after {ms} ms",
            f"[{1714566896 + i}] WARN pool-{i % 7}-thread-{i % 13} retry {i % 5}/5 in {ms / 7:.3f}s",
            f'May  1 12:34:{i % 60:02d} host{i} sshd[{40_000 + i}]: Failed password for "ops{i}" '
            f"from {ip} port {port} ssh2",
            f"HTTP/1.1 {500 + i % 4} from [2001:db8::{i:x}]:{port} after {ms}µs; "
            f"1,{i:03d},000 bytes; -{i}.{ms} ratio 1e-{i % 9}",
            f"request 123e4567-e89b-12d3-a456-{i:012x} v1.2.{i} build 0x{ms:08x} "
            f"sha {rng.getrandbits(64):016x}",
        ]
    texts.append("x" * 5_000 + " at 12:00:00.123 " * 300)  # long: read only until its key shows enough
    texts.append(" ".join(str(n) for n in range(20_000)))  # dense with numbers
    return texts


def test_log_style_texts_group_as_the_signature_does(harm):
    conn, srv = harm
    texts = log_texts()
    put_dead_matching(conn, texts)
    assert errors_of(conn, srv) == signatures(texts)


def test_a_100kb_run_of_digits_ending_in_minus_1_1(harm):
    """`%d+%.%d+` over a long digit run with no dot would be quadratic; one pass is not."""
    conn, srv = harm
    texts = ["1" * 100_000 + "-1.1", "9" * 100_000, "." + "1" * 100_000 + "."]
    ids = put_dead_matching(conn, texts)
    assert errors_of(conn, srv) == signatures(texts)
    for glob in ("*-1.1", "*-1.2", "1*1", "*[0-9]", "*.?"):
        assert found(conn, srv, error=glob) == matching(ids, texts, glob), glob


NOT_UTF8 = [
    b"\xff\xfe timeout 123 \xc3",
    b"caf\xc3\xa9 42 'quoted \xff' done",
    b"\x80" * 1_000 + b"9 deadbeef1 \xe2\x82",
    b"\xed\xa0\x80 surrogate bytes 3.14 \xf4\x90\x80\x80",
]


def test_texts_of_bytes_that_are_not_utf8(harm):
    conn, srv = harm
    ids = put_dead_matching(conn, NOT_UTF8)
    assert errors_of(conn, srv) == signatures(NOT_UTF8)
    for glob in ("*42*", "?*", "*[\udcff]*", "*\udcc3", "caf? *", "[!a-z]*", "*?\udc82"):
        assert found(conn, srv, error=glob) == matching(ids, NOT_UTF8, glob), glob


# -- globs ------------------------------------------------------------------------------


def test_a_thousand_character_glob_against_100kb_texts_returns(harm):
    conn, srv = harm
    rng = random.Random(1000)
    texts = ["a" * 100_000, "ab" * 50_000, "x" * 99_999 + "é", "?" * 100_000]
    ids = put_dead_matching(conn, texts)
    items = ["?", "*", "[a-z]", "[!x]", "?", "a", "[ab]"]
    globs = [
        "?" * defaults.MAX_GLOB,
        "*" + "[a-y]?" * 166 + "x",
        "".join(rng.choice(items) for _ in range(defaults.MAX_GLOB))[: defaults.MAX_GLOB],
        ("*a" * 500)[: defaults.MAX_GLOB],
    ]
    for glob in globs:
        assert len(glob) <= defaults.MAX_GLOB
        assert found(conn, srv, error=glob) == matching(ids, texts, glob), glob[:40]


def test_timeout_retry_glob_over_tracebacks_with_one_non_ascii_character(harm):
    """Classes between stars over 18 KB texts past ASCII: a whole anchored pattern would
    be polynomial in the text; the matcher finds `imeout` and `etry` with plain finds."""
    conn, srv = harm
    rng = random.Random(18)
    texts = []
    for i in range(100):
        frames = "".join(
            f'  File "/srv/app/module_{j}.py", line {rng.randrange(2_000)}, in handle_{j}\n'
            "    value = call(x)\n"
            for j in range(240)
        )
        cut = rng.randrange(len(frames))
        body = "Traceback (most recent call last):\n" + frames[:cut] + "é" + frames[cut:]
        tail = "TimeoutError: gave up, will retry" if i % 7 == 0 else "ValueError: bad input"
        texts.append(body[: 18_000 - len(tail)] + tail)
    ids = put_dead_matching(conn, texts)
    glob = "*[Tt]imeout*[Rr]etry*"
    got = found(conn, srv, error=glob)
    assert got == matching(ids, texts, glob) and len(got) == 15


def test_a_glob_over_the_longest_is_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for how in ({"error": "?" * 100_000}, {"payload": "*" * (defaults.MAX_GLOB + 1)}):
        with pytest.raises(BadInput, match=f"{defaults.MAX_GLOB:,}") as refused:
            triage.find(nowhere, Q_matching, **how)
        assert "\n" not in str(refused.value)
    with pytest.raises(BadInput, match="a signature's glob"):
        triage.find(nowhere, Q_matching, signature="<num>*" * 400)
    triage.glob_spec("?" * defaults.MAX_GLOB)  # the longest is taken


def test_a_budget_over_the_maximum_is_refused_before_any_io():
    nowhere = emq.connect("redis://127.0.0.1:1/0", cluster=False)
    for call in (triage.find, triage.errors):
        with pytest.raises(BadInput, match=f"{defaults.MAX_BUDGET:,}"):
            call(nowhere, Q_matching, budget=defaults.MAX_BUDGET + 1)


# -- bounded by work ----------------------------------------------------------------------


def step(conn, script: str, budget: int, byte_budget: int, *rest) -> list:
    """One call of @errors or @find from the start of dead."""
    return conn.run(
        script, [DEAD_matching, ROOT], ["", "", budget, byte_budget, *rest], verb=script, queue=Q_matching
    )


FIND_ANY = [1000, "", "", "", "", "", ""]  # limit, then no filter


def test_a_step_stops_at_its_byte_budget_and_the_scan_goes_on_from_there(harm):
    conn, srv = harm
    texts = [f"boom {i} " + "x" * 100_000 for i in range(30)]
    ids = put_dead_matching(conn, texts)
    # 100 KB a text against 250 KB: the third's would pass it, so the step ends before it
    score, member, more, *groups = bounded(
        lambda: step(conn, "errors", 1000, 250_000, triage.SIGNATURE_LENGTH), srv
    )
    assert (member, more) == (ids[1], 1) and [g[1] for g in groups] == [2]
    # find reads no text with no filter, and sends its matches' fields while they fit:
    # the third's text goes by its place (9: the caller reads it), and the step ends there
    score, member, more, *rows = bounded(lambda: step(conn, "find", 1000, 250_000, *FIND_ANY), srv)
    assert member == ids[2] and more == 1 and [len(r) for r in rows] == [10, 10, 11]
    assert rows[2][7] is None and rows[2][10] == 6
    assert errors_of(conn, srv) == signatures(texts)
    assert found(conn, srv) == ids


def test_members_with_no_row_and_rows_with_no_error_cost_budget(harm):
    conn, srv = harm
    conn.client.zadd(DEAD_matching, {f"ghost_{i:03d}": i for i in range(50)})  # ahead of the rows
    ids = put_dead_matching(conn, ["boom 1", "boom 2"])
    conn.client.hdel(ROOT + "job:" + ids[0], "last_error")
    score, member, more, *groups = bounded(
        lambda: step(conn, "errors", 10, 1 << 20, triage.SIGNATURE_LENGTH), srv
    )
    assert (member, more, groups) == ("ghost_009", 1, [])
    score, member, more, *rows = bounded(lambda: step(conn, "find", 10, 1 << 20, *FIND_ANY), srv)
    assert (member, more, rows) == ("ghost_009", 1, [])
    assert errors_of(conn, srv) == {"": 1, "boom <num>": 1}
    assert found(conn, srv) == ids and found(conn, srv, min_attempts=0) == ids


UNDECODABLE = re.compile("[\udc80-\udcff]")
CHARS = st.sampled_from(list("ab?*[]!-^x.\\ é€") + ["\udcff", "\udcc3", "\udca9", "😀"])


def canonical_matching(text: str) -> str:
    return text.encode("utf-8", decoding.ERRORS).decode("utf-8", decoding.ERRORS)


drawn = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@drawn
@given(st.text(CHARS, max_size=14).map(canonical_matching), st.text(CHARS, max_size=10))
def test_the_matcher_with_the_check_after_it_is_fnmatchcase(conn, text, glob):
    """The server's matcher lets through every text fnmatch matches, and nothing else
    unless the text or the glob holds a byte that is no part of a well-formed UTF-8
    character (a literal such byte can match inside a character); what it lets through
    then, `find`'s check after it settles."""
    expected = fnmatch.fnmatchcase(text, glob)
    said = conn.client.eval(MATCH, 0, decoding.wire(text), decoding.wire(triage.glob_spec(glob)))
    if expected:
        assert said == 1
    elif not UNDECODABLE.search(text + glob):
        assert said == 0
    conn.client.delete(DEAD_matching)
    put_dead_matching(conn, [text])
    assert (triage.find(conn, Q_matching, error=glob).index.tolist() == ["j_0000"]) is expected


# -- Do no harm, the reads (bench/harm.py found each): a job's long `:logs` list is read in pages
# bounded by lines and bytes; a payload too large for a script is read with a plain HGET, never
# inside one; a snapshot's call stops at about a byte budget; find, errors and the snapshot pass
# over a member whose id names another job's `:logs` list (its "row" key is a list); a runbook finds
# its queue without a SCAN. Both backends, every call that could hold a server under the harness's
# watchdog (tests/harm.py). Work is observed in the replies, never timed.


@pytest.mark.parametrize("verb", ["find", "errors"])
def test_find_and_errors_count_each_ids_bytes_in_a_steps_budget(harm, verb):
    conn, srv = harm
    ids = long_dead(conn, 150, 20_000)
    steps = replies(conn, verb)
    if verb == "find":
        got = bounded(lambda: triage.find(conn, Q_reads, error="upstream*", limit=None), srv, what=verb)
        assert list(got.index) == ids
    else:
        got = bounded(lambda: triage.errors(conn, Q_reads), srv, what=verb)
        assert int(got["count"].sum()) == 150
    # a step ends after the member whose id reaches the budget: about 53 of 20 KB a step, not 150
    assert len(steps) == 3, [len(s) for s in steps]


def test_find_reads_a_payload_too_large_for_a_script_with_a_plain_read(harm):
    conn, srv = harm
    big = "z" * (BIG // 2) + "needle" + "z" * (BIG // 2)
    dead_row(conn, "j_big", error="upstream timed out", body=big, score=1)
    dead_row(conn, "j_small", error="upstream timed out", body='{"needle": 1}', score=2)
    calls = replies(conn, "find")
    by_error = bounded(lambda: triage.find(conn, Q_reads, error="upstream*"), srv, what="find")
    assert list(by_error.index) == ["j_big", "j_small"] and by_error.loc["j_big", "payload"] == big
    by_payload = bounded(lambda: triage.find(conn, Q_reads, payload="*needle*"), srv, what="find")
    assert list(by_payload.index) == ["j_big", "j_small"] and by_payload.loc["j_big", "payload"] == big
    assert bounded(lambda: triage.find(conn, Q_reads, payload="*nothing*"), srv, what="find").empty
    sent = [m for reply in calls for m in reply[3:]]
    assert all(len(m) == 11 and m[9] is None for m in sent if m[0] == "j_big")


# -- a member whose id names another job's :logs list ------------------------------------


def test_find_passes_over_an_id_naming_another_jobs_logs(dead_with_a_logs_id):
    conn, srv, rows = dead_with_a_logs_id
    for how in ({}, {"error": "*"}, {"payload": "*"}, {"min_attempts": 0}):
        got = bounded(lambda how=how: triage.find(conn, Q_reads, limit=None, **how), srv, what=f"find({how})")
        assert list(got.index) == rows, how


def test_errors_pass_over_an_id_naming_another_jobs_logs(dead_with_a_logs_id):
    conn, srv, rows = dead_with_a_logs_id
    got = bounded(lambda: triage.errors(conn, Q_reads), srv, what="errors")
    assert int(got["count"].sum()) == len(rows)
    assert got.loc["written by another node", "count"] == 2


# -- Do no harm, the bytes of a row: a read of rows keeps its call's byte budget across the fields
# of a row and the rows of a chunk, not only field by field. Every field under the longest a read
# copies (1 MiB-1, say) still made one `@read_rows` call of 64 such fields copy 64 MiB (Valkey held
# 107 to 121 ms, bench/harm.py --wide), one `@find` step read a chunk of 8 rows of 4 such fields.
# Now a row whose fields would take a call past its budget ends the call before it (the caller sends
# it again), a call's first row is read as far as it fits (the rest answered by their places, for
# `jobs.whole_field`), and a scan step (`@find`, `@errors`) measures a chunk's rows before reading
# any. Both backends; work is observed as the bytes each script call copied (the reading commands it
# ran, counted against the rows they read), never timed.
Q_row_bytes = "rowbytes"
P_row_bytes = base(Q_row_bytes)
NEAR = BYTE_BUDGET - 1  # a field one byte under the longest a read copies
ID_BYTES = 100  # more than any id below
# what a match's fields may take past a find step's bytes left (find.lua SENT_BYTES)
SENT_BYTES = 4096


# -- the reading commands a script runs, and the bytes they copied -----------------------


@pytest.fixture
def reads(harm, monkeypatch) -> Callable[[str], ScriptReads]:
    conn, srv = harm
    return lambda name: ScriptReads(conn, srv, monkeypatch, name)


# -- @find and @errors -------------------------------------------------------------------


def dead_rows(conn, rows: list[tuple[str, dict[str, str]]]) -> None:
    for score, (job_id, fields) in enumerate(rows):
        conn.client.hset(P_row_bytes + "job:" + job_id, mapping={"state": "dead", **fields})
        conn.client.zadd(P_row_bytes + "dead", {job_id: score})


def ordinary(i: int) -> tuple[str, dict[str, str]]:
    fields = {"group": "g", "attempts": "1", "created_at": "1714566896000", "last_error": f"boom {i}"}
    return f"o_{i:03d}", fields | {"payload": "{}"}


def test_errors_reads_a_chunk_of_long_texts_a_budget_a_step(harm, reads):
    conn, srv = harm
    # ordinary rows first, so a step's chunks have grown to 8 when the long texts come
    rows = [ordinary(i) for i in range(20)]
    rows += [(f"l_{i}", {"last_error": chr(ord("a") + i) * NEAR}) for i in range(8)]
    rows += [ordinary(i) for i in range(20, 25)]
    dead_rows(conn, rows)
    spy = reads("errors")
    got = bounded(lambda: triage.errors(conn, Q_row_bytes), srv, what="errors")
    assert int(got["count"].sum()) == 33
    # each step copied its budget at most, beside its first member's id: the old step
    # read the chunk's 3 long texts after its ordinary rows, 3 MiB
    assert max(spy.copied()) <= BYTE_BUDGET + ID_BYTES, spy.copied()


def test_find_reads_a_chunk_of_long_fields_and_sends_its_matches_a_budget_a_step(harm, reads):
    conn, srv = harm
    long_filtered = dict.fromkeys(("group", "attempts", "created_at", "last_error"), "f" * NEAR)
    long_shown = dict.fromkeys(("priority", "failures", "last_error", "progress", "payload"), "s" * NEAR)
    rows = [ordinary(i) for i in range(20)]
    rows += [(f"f_{i}", ordinary(i)[1] | long_filtered) for i in range(6)]  # match no filter
    rows += [(f"s_{i}", ordinary(i)[1] | long_shown) for i in range(6)]  # match every filter
    rows += [ordinary(i) for i in range(20, 25)]
    dead_rows(conn, rows)
    spy = reads("find")
    got = bounded(
        lambda: triage.find(
            conn, Q_row_bytes, group="g", min_attempts=1, created_after=0, error="*", limit=None
        ),
        srv,
        what="find",
    )
    matching = [job_id for job_id, _ in rows if not job_id.startswith("f_")]
    assert list(got.index) == matching
    for field in ("last_error", "progress", "payload"):
        shown = [None if pd.isna(v) else v for v in got[field]]
        assert shown == [conn.client.hget(P_row_bytes + "job:" + i, field) for i in matching], field
    # each step copied its budget at most, beside a match's ordinary fields and its
    # first member's id: the old step read 4 fields of 1 MiB of each of a chunk's rows
    assert max(spy.copied()) <= BYTE_BUDGET + SENT_BYTES + ID_BYTES, spy.copied()


def test_a_find_step_is_not_cut_short_by_rows_it_measures_whole(harm):
    """On Valkey a row of ordinary size is measured whole (three filters or more), its
    figure counting its payload too, which no filter reads: more than it holds. A chunk
    ends before a row its figures leave too few bytes for, and the next chunk counts again
    from the bytes read, so a step reads as many rows as the fake, which measures each
    field: 6 rows of 150 KB texts (beside 200 KB payloads) a step, not 5."""
    conn, srv = harm
    text, body = "e" * 150_000, "p" * 200_000
    dead_rows(
        conn, [(f"o_{i:03d}", ordinary(i)[1] | {"last_error": text, "payload": body}) for i in range(40)]
    )
    steps = replies(conn, "find")
    got = bounded(
        lambda: triage.find(conn, Q_row_bytes, group="g", min_attempts=1, error="[x]*"), srv, what="find"
    )
    assert got.empty
    assert [len(step) for step in steps] == [3] * 7  # no match: the cursor alone
    ends = [step[1] for step in steps]
    assert ends == [f"o_{i:03d}" for i in (5, 11, 17, 23, 29, 35, 39)]
