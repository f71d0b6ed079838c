"""Triage reads: `find` on the server against a Python oracle (fnmatch), a scan that
stays right while the queue moves, `signature` by a table of examples, and `errors`
against a pandas grouping of the same rows. Both backends; the function executor
and a read-only session where the script runs as FCALL_RO."""

from __future__ import annotations

import fnmatch
import random
import re
import threading

import pandas as pd
import pytest
import redis
from helpers import dump, open_conn, server_for, server_url
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import decoding, frames, jobs, scripts, triage
from emq_notebook.defaults import MAX_BUDGET
from emq_notebook.errors import BadInput, InvalidName

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
