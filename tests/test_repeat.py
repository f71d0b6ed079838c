"""The repeat registry (emq_notebook/repeat.py), on both backends: its listings, its
definitions and its tick, against what another node wrote.

Do no harm, the repeat registry: a listing reads it a page at a time (`@read_repeats`,
a member count and a byte budget a call), a definition too long for a call is answered
by its size and its bytes stay on the server, and a definition another node wrote that
no tick can run is a row that says why, never a listing that fails. run-now reads its
one repeatable's due time. Both backends, the big cases under the harness's watchdog
(tests/harm.py). Work is observed in the replies and the commands sent, never timed."""

from __future__ import annotations

import json
import math
import random
import re

import pandas as pd
import pytest
from harm import Events, ScriptReads, bounded, replies, sent

import emq_notebook as emq
from emq_notebook import admin, magics, repeat, scripts
from emq_notebook.defaults import BYTE_BUDGET
from emq_notebook.errors import BadInput, BadRow, EMQError
from emq_notebook.widgets.lanes_view import RepeatablesView

Q = "repeats"
P = f"emq:{{{Q}}}:"
DEF = '{"every": 60000, "payload": "{}", "group": "", "max_attempts": "1"}'


def written(conn, names, due=lambda i: 1000 + i, definition=lambda name: DEF) -> None:
    """Repeatables written straight into the registry, as another node may have."""
    pipe = conn.client.pipeline(transaction=False)
    for start in range(0, len(names), 1000):
        chunk = names[start : start + 1000]
        pipe.zadd(P + "repeat", {n: due(start + k) for k, n in enumerate(chunk)})
        pipe.hset(P + "repeat:defs", mapping={n: definition(n) for n in chunk})
        pipe.execute()


def listed(conn, srv=None, **kw) -> list[dict]:
    return bounded(lambda: repeat.registered(conn, Q, **kw), srv, what="registered")


# -- many repeatables --------------------------------------------------------------------


def test_a_big_registry_is_listed_whole_in_due_order_a_page_a_call(harm):
    conn, srv = harm
    names = [f"r_{i:05d}" for i in range(2_500)]
    written(conn, names)
    pages = replies(conn, "read_repeats")
    got = listed(conn, srv)
    # each call answered at most REPEATS_A_CALL (name, due, definition, problem), and
    # about BYTE_BUDGET bytes: a name and its definition decoded whole, counted 16 times
    per = len("r_00000") + 16 * len(DEF)
    assert [len(p) // 4 for p in pages] == [972, 972, 556] and per * 971 < BYTE_BUDGET <= per * 972
    assert [p[-1] for p in pages] == [per * 972, per * 972, per * 556]
    assert [r["name"] for r in got] == names
    assert [r["next_due_ms"] for r in got] == [1000 + i for i in range(2_500)]
    assert {r["every_ms"] for r in got} == {60_000} and {r["problem"] for r in got} == {None}


def test_a_listing_reads_pages_from_the_place_the_one_before_ended(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(repeat, "REPEATS_A_CALL", 3)
    names = [f"r_{i}" for i in range(8)]
    written(conn, names)
    pages = replies(conn, "read_repeats")
    assert [r["name"] for r in listed(conn, srv)] == names
    assert [[p[k] for k in range(0, len(p) - 1, 4)] for p in pages] == [names[0:3], names[3:6], names[6:8]]
    assert [r["name"] for r in listed(conn, srv, limit=4)] == names[:4]


def test_a_repeatable_a_tick_moves_behind_the_place_is_listed_once(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr(repeat, "REPEATS_A_CALL", 3)
    names = [f"r_{i}" for i in range(6)]
    written(conn, names)
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name == "read_repeats" and int(args[0]) == 0:
            conn.client.zadd(P + "repeat", {"r_0": 10**12})  # its next beat, after the rest
        return reply

    conn.run = run
    assert [r["name"] for r in listed(conn, srv)] == names


def test_large_definitions_are_read_about_a_byte_budget_a_call(harm):
    conn, srv = harm
    body = "p" * 300_000
    written(
        conn,
        [f"r_{i:02d}" for i in range(12)],
        definition=lambda n: f'{{"every": 1000, "payload": "{body}"}}',
    )
    pages = replies(conn, "read_repeats")
    got = listed(conn, srv)
    assert len(got) == 12 and {r["payload"] for r in got} == {body}
    # four definitions reach the budget: a call stops after the one that does (the last
    # page stopped so too, so one more call finds the end)
    assert [len(p) // 4 for p in pages] == [4, 4, 4, 0]


# -- what another node wrote ---------------------------------------------------------------


def test_a_definition_too_long_is_listed_by_its_size_and_its_bytes_stay_on_the_server(harm):
    conn, srv = harm
    repeat.register(conn, Q, "nightly", 86_400_000, '{"report": 1}')
    written(conn, ["huge"], definition=lambda n: "x" * (2 << 20))
    pages = replies(conn, "read_repeats")
    commands = sent(conn, srv, lambda: listed(conn, srv))
    huge, nightly = listed(conn, srv)
    assert huge == {
        "name": "huge",
        "every_ms": None,
        "payload": None,
        "group": None,
        "next_due_ms": 1000,
        "problem": f"too long ({2 << 20:,} bytes)",
    }
    assert nightly["payload"] == '{"report": 1}' and nightly["problem"] is None
    # its length crossed the wire, not its bytes: one HGET read a definition, nightly's
    assert sum(len(str(v)) for p in pages for v in p) < 1000
    if srv is None:
        assert set(commands) <= {"evalsha", "eval", "script"}
    else:
        assert commands["hget"] == 1 and commands["hstrlen"] == 2 and "hgetall" not in commands


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        ("not json {", "not JSON"),
        ("", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ('{"every": "often", "payload": "{}"}', "bad every"),
        ('{"every": 0.5, "payload": "{}"}', "bad every"),
        ('{"every": 1000, "payload": 7}', "bad payload"),
        ('{"every": 1000, "payload": "{}", "group": 3}', "bad group"),
        ('{"every": 1000, "payload": "{}", "max_attempts": "three"}', "bad max_attempts"),
    ],
)
def test_a_definition_no_tick_can_run_is_a_row_that_says_why(conn, definition, problem):
    repeat.register(conn, Q, "nightly", 86_400_000, '{"report": 1}')
    written(conn, ["broken"], definition=lambda n: definition)
    broken, nightly = repeat.registered(conn, Q)
    assert broken["name"] == "broken" and broken["problem"] == problem
    assert broken["every_ms"] is None and broken["payload"] is None and broken["next_due_ms"] == 1000
    assert nightly["every_ms"] == 86_400_000 and nightly["problem"] is None


def test_a_due_name_with_no_definition_and_a_due_time_of_inf_are_rows(conn):
    conn.client.zadd(P + "repeat", {"ghost": 5, "never": float("inf")})
    conn.client.hset(P + "repeat:defs", "never", DEF)
    ghost, never = repeat.registered(conn, Q)
    assert (ghost["name"], ghost["problem"], ghost["next_due_ms"]) == ("ghost", "no definition", 5)
    assert (never["name"], never["problem"], never["next_due_ms"], never["every_ms"]) == (
        "never",
        None,
        None,
        60_000,
    )


def test_a_name_that_is_not_utf8_is_listed_and_its_due_time_read(conn):
    raw = b"nightly-\xff\xfe"
    conn.client.zadd(P + "repeat", {raw: 7})
    conn.client.hset(P + "repeat:defs", raw, '{"every": 1000, "payload": "\xe9t\xe9"}')
    [row] = repeat.registered(conn, Q)
    assert row["name"] == raw.decode("utf-8", "surrogateescape") and row["problem"] is None
    assert row["payload"] == "été" and row["every_ms"] == 1000
    assert repeat.next_due(conn, Q, row["name"]) == 7


def test_the_repeats_verb_shows_a_broken_definition_beside_the_good(emq_line, conn):
    repeat.register(conn, Q, "nightly", 86_400_000, '{"report": 1}')
    written(conn, ["broken"], definition=lambda n: "[1]")
    table = emq_line(f"repeats {Q}")
    assert list(table.index) == ["broken", "nightly"]
    assert table.loc["broken", "problem"] == "not a JSON object" and pd.isna(table.loc["nightly", "problem"])


# -- the watching and acting paths -----------------------------------------------------------


def test_run_now_reads_its_one_due_time_not_the_registry(harm, ip, capsys):
    conn, srv = harm
    magics.SESSION.conn = conn
    due = repeat.register(conn, Q, "nightly", 86_400_000, "{}")
    written(conn, [f"r_{i}" for i in range(50)], due=lambda i: 10**13)
    listings = replies(conn, "read_repeats")
    commands = sent(conn, srv, lambda: ip.run_line_magic("emq", f"run-now {Q} nightly"))
    assert "next due" in capsys.readouterr().out
    assert listings == [] and "zrange" not in commands and "hgetall" not in commands
    assert commands["zscore"] >= 1 and repeat.next_due(conn, Q, "nightly") == due
    assert repeat.next_due(conn, Q, "weekly") is None


def test_the_repeatables_panel_reads_the_first_due_and_counts_the_rest(harm, monkeypatch):
    conn, srv = harm
    monkeypatch.setattr("emq_notebook.widgets.lanes_view.SHOWN", 3)
    written(conn, [f"r_{i}" for i in range(10)])
    pages = replies(conn, "read_repeats")
    view = RepeatablesView(conn, Q)
    try:
        assert list(view.frame.index) == ["r_0", "r_1", "r_2"]
        assert "10 repeatables" in view.summary.value and ("repeatables", 10) in view.facts()
        assert [len(p) // 4 for p in pages] == [3]
    finally:
        view.close()


# -- what a tick, a run-now and a register read and write -----------------------------------


def _def_of(payload: str) -> str:
    return json.dumps({"every": 60000, "payload": payload, "group": "", "max_attempts": "1"})


def test_the_scripts_longest_definition_is_the_listings():
    from emq_notebook import scripts

    said = re.search(r"^local DEF_BYTES = (\d+)$", scripts.source("repeat_tick"), re.M)
    assert said is not None and int(said.group(1)) == repeat.DEF_BYTES


def test_a_tick_reads_about_def_bytes_of_definitions_a_call_and_the_rest_wait(harm):
    conn, srv = harm
    big = "x" * (repeat.DEF_BYTES // 3)  # three of them fill a call's bytes
    names = [f"r_{i}" for i in range(5)]
    written(conn, names, definition=lambda name: _def_of(big))
    first = bounded(lambda: repeat.tick(conn, Q, max_jobs=10), srv, what="tick")
    assert len(first) == 3  # the third took the definitions read past DEF_BYTES
    second = bounded(lambda: repeat.tick(conn, Q, max_jobs=10), srv, what="tick")
    assert len(second) == 2
    payloads = {conn.client.hget(P + "job:" + j, "payload") for j in first + second}
    assert payloads == {big}


def test_a_definition_over_def_bytes_is_never_read_by_a_tick_or_a_run_now(harm):
    conn, srv = harm
    huge = _def_of("h" * (repeat.DEF_BYTES + 10))
    written(conn, ["huge", "small"], definition=lambda name: huge if name == "huge" else DEF)
    made: list[str] = []
    ran = sent(
        conn, srv, lambda: made.extend(bounded(lambda: repeat.tick(conn, Q, max_jobs=10), srv, what="tick"))
    )
    assert len(made) == 1  # the small one; the huge one skipped, left as it is
    assert conn.client.hget(P + "job:" + made[0], "payload") == "{}"
    assert (
        conn.client.hexists(P + "repeat:defs", "huge")
        and conn.client.zscore(P + "repeat", "huge") is not None
    )
    if srv is not None:  # counted by the server: the huge definition measured, never read
        assert (ran["hstrlen"], ran["hget"]) == (2, 1), ran
    with pytest.raises(BadRow, match="bytes"):
        repeat.run_now(conn, Q, "huge")


def test_register_refuses_a_payload_no_tick_would_read(harm):
    conn, _ = harm
    with pytest.raises(BadInput, match="at most"):
        repeat.register(conn, Q, "big", 60_000, "p" * (repeat.DEF_BYTES + 1))
    # a payload within the bound whose JSON escapes past it: refused before any I/O,
    # naming the definition's size and the bound
    calls = replies(conn, "repeat_add")
    escaped = "\x01" * (repeat.DEF_BYTES // 4)  # each \u0001 in the JSON: 6 bytes
    size = len(repeat._definition_text(60_000, escaped))
    with pytest.raises(BadInput, match=f"at most {repeat.DEF_BYTES:,} bytes .*not {size:,}"):
        repeat.register(conn, Q, "slashes", 60_000, escaped)
    assert calls == []
    assert not conn.client.exists(P + "repeat:defs") and not conn.client.exists(P + "repeat")


def _filling(unit: str) -> str:
    """A payload of `unit`s whose definition is at most DEF_BYTES (each `unit` as JSON writes it)."""
    head = len(repeat._definition_text(60_000, "").encode())
    written = len(json.dumps(unit, ensure_ascii=False)[1:-1].encode())
    return unit * ((repeat.DEF_BYTES - head) // written)


@pytest.mark.parametrize("unit", ["a", "\x01", '"', "/", "\u00e9", "\u20ac", "\U0001f600"])
def test_register_stores_a_definition_up_to_def_bytes_and_refuses_one_byte_more(harm, unit):
    """The client writes the definition's JSON itself, so it knows its bytes exactly:
    one of DEF_BYTES is stored as sent (and a tick makes its job), one byte more is refused
    before any I/O, whatever the payload's characters write as in JSON."""
    conn, srv = harm
    payload = _filling(unit)
    pad = repeat.DEF_BYTES - len(repeat._definition_text(60_000, payload).encode())
    payload += "a" * pad  # exactly DEF_BYTES
    text = repeat._definition_text(60_000, payload)
    assert len(text.encode()) == repeat.DEF_BYTES
    repeat.register(conn, Q, "full", 60_000, payload)
    assert conn.client.hstrlen(P + "repeat:defs", "full") == repeat.DEF_BYTES
    assert conn.client.hget(P + "repeat:defs", "full") == text
    conn.client.zadd(P + "repeat", {"full": 0})
    [job] = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    assert conn.client.hget(P + "job:" + job, "payload") == payload
    before = conn.client.hget(P + "repeat:defs", "full")
    with pytest.raises(BadInput, match=f"not {repeat.DEF_BYTES + 1:,}"):
        repeat.register(conn, Q, "full", 60_000, payload + "a")
    assert conn.client.hget(P + "repeat:defs", "full") == before


def test_the_scripts_own_bound_refuses_too_long_typed_and_writes_nothing(harm):
    """The server's guard, for a definition sent past the client's check (another client,
    an older one): TooLong, a refusal and a BadInput, naming the size and the bound."""
    from emq_notebook.errors import Refused, TooLong

    conn, _ = harm
    text = repeat._definition_text(60_000, "p" * repeat.DEF_BYTES)
    with pytest.raises(TooLong) as caught:
        conn.run("repeat_add", [P], ["big", text], verb="repeat", queue=Q, job="big")
    refusal = caught.value
    assert isinstance(refusal, BadInput) and isinstance(refusal, Refused) and refusal.reason == "too_long"
    assert refusal.line() == (
        f"refused: repeat {Q} big — too_long (definition {len(text)} bytes, at most {repeat.DEF_BYTES})"
    )
    # and a definition no tick reads: an error no caller of the toolkit meets
    for bad in ("[1]", '{"every": 0, "payload": "{}"}', '{"every": 1000}'):
        with pytest.raises(EMQError, match="no tick reads"):
            conn.run("repeat_add", [P], ["bad", bad], verb="repeat", queue=Q)
    assert conn.client.keys(P + "*") == []


def test_register_stores_any_payload_a_tick_gives_back_as_it_was(harm):
    conn, srv = harm
    payloads = ['{"url": "https://x/y", "q": "\\"quoted\\""}', "tab\tnew\nline\x7f\x00", "été € 😀 \u2028"]
    for k, payload in enumerate(payloads):
        repeat.register(conn, Q, f"r{k}", 60_000, payload)
    conn.client.zadd(P + "repeat", {f"r{k}": 0 for k in range(len(payloads))})
    made = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    assert sorted(conn.client.hget(P + "job:" + j, "payload") for j in made) == sorted(payloads)
    assert [r["payload"] for r in repeat.registered(conn, Q)] == payloads


# -- a tick's bound is the work it does, whatever another node wrote ------------------------


def _tick(conn, srv, max_jobs=10):
    return bounded(lambda: repeat.tick(conn, Q, max_jobs=max_jobs), srv, what="tick")


def test_a_tick_examines_at_most_tick_names_bad_definitions_and_leaves_them(harm):
    conn, srv = harm
    names = [f"bad_{i:04d}" for i in range(repeat.TICK_NAMES + 40)]
    written(conn, names, due=lambda i: 0, definition=lambda name: "not json")
    with Events(conn, Q) as events:
        assert _tick(conn, srv) == []
    # the first TICK_NAMES in due order examined (the next call starts after them), the
    # first TICK_REPORTS of them reported; each left as it was
    assert repeat._PLACES[conn][Q] == repeat.TICK_NAMES
    assert sorted(e["repeat"] for e in events.seen if e["event"] == "bad_row") == names[: repeat.TICK_REPORTS]
    assert conn.client.zcard(P + "repeat") == len(names) and conn.client.hlen(P + "repeat:defs") == len(names)


def test_a_tick_takes_out_at_most_tick_names_names_with_no_definition(harm):
    conn, srv = harm
    names = [f"ghost_{i:04d}" for i in range(repeat.TICK_NAMES + 40)]
    conn.client.zadd(P + "repeat", {n: 0 for n in names})
    assert _tick(conn, srv) == []
    assert conn.client.zrange(P + "repeat", 0, -1) == names[repeat.TICK_NAMES :]
    assert _tick(conn, srv) == [] and conn.client.zcard(P + "repeat") == 0


def test_a_good_repeatable_behind_bad_ones_is_made_within_the_bound(harm):
    conn, srv = harm
    written(conn, [f"bad_{i}" for i in range(30)], due=lambda i: 0, definition=lambda name: "[1]")
    conn.client.zadd(P + "repeat", {"good": 1})
    conn.client.hset(P + "repeat:defs", "good", DEF)
    [made] = _tick(conn, srv)
    assert conn.client.hget(P + "job:" + made, "payload") == "{}"
    assert conn.client.zscore(P + "repeat", "good") > 1


def test_a_bad_rows_event_names_a_long_repeatable_by_its_head_and_length(harm):
    conn, srv = harm
    name = b"\xff" * 10_000
    conn.client.zadd(P + "repeat", {name: 0})
    conn.client.hset(P + "repeat:defs", name, "x")
    with Events(conn, Q) as events:
        assert _tick(conn, srv) == []
    [event] = events.seen
    assert event["event"] == "bad_row" and event["repeat"] == "\\xff" * 200 + "... (10000 bytes)"


def test_a_tick_makes_at_most_max_tick_jobs_a_call():
    assert repeat.MAX_TICK_JOBS <= 250
    with pytest.raises(BadInput, match="max_jobs"):
        repeat.tick(None, Q, max_jobs=1000)  # type: ignore[arg-type]


@pytest.mark.parametrize("due", [-1e300, -1e20, -9.0e15])
def test_a_due_time_far_in_the_past_makes_one_job_and_moves_past_now(harm, due):
    conn, srv = harm
    written(conn, ["old"], due=lambda i: due, definition=lambda name: '{"every": 1000, "payload": "{}"}')
    assert len(_tick(conn, srv)) == 1
    assert conn.client.zscore(P + "repeat", "old") > conn.server_ms()
    assert _tick(conn, srv) == []


# -- registry keys of another type ------------------------------------------------------------


def _misfit(conn, key: str, kind: str) -> None:
    if kind == "string":
        conn.client.set(P + key, "x")
    else:
        conn.client.rpush(P + key, "x")
    if key == "repeat:defs":
        conn.client.zadd(P + "repeat", {"nightly": 0})
    else:
        conn.client.hset(P + "repeat:defs", "nightly", DEF)


@pytest.mark.parametrize("kind", ["string", "list"])
@pytest.mark.parametrize("key", ["repeat", "repeat:defs"])
def test_a_registry_key_of_another_type_makes_no_job_and_refuses_what_would_write(harm, key, kind):
    conn, srv = harm
    _misfit(conn, key, kind)
    before = sorted(conn.client.keys(P + "*"))
    assert _tick(conn, srv) == []
    with pytest.raises(BadRow, match="type"):
        repeat.run_now(conn, Q, "nightly")
    with pytest.raises(BadRow, match="type"):
        repeat.register(conn, Q, "weekly", 60_000, "{}")
    # nothing written: no job, no meta, no definition
    assert sorted(conn.client.keys(P + "*")) == before
    if key == "repeat":
        assert repeat.registered(conn, Q) == []
        assert repeat.next_due(conn, Q, "nightly") is None


# -- times and text another node wrote, shown ------------------------------------------------

ODD = {"far": 1e16, "just_past": 9.3e15, "huge": 1e300, "ancient": -1e300, "ok": 1e12}


def _odd_registry(conn) -> None:
    written(conn, list(ODD), due=lambda i: list(ODD.values())[i])
    conn.client.zadd(P + "repeat", {b"n\xff\xfe": 5})
    conn.client.hset(
        P + "repeat:defs", b"n\xff\xfe", b'{"every": 1000, "payload": "\xff\xfe", "group": "g\xff"}'
    )


# the embedded fake's cjson decodes UTF-8 only: its tick skips a definition holding other
# bytes, and a listing, which asks the server, says so
ODD_PROBLEM = {"fake": "not JSON", "valkey": None}


def test_the_repeatables_panel_shows_odd_times_blank_and_odd_bytes_escaped(conn, backend):
    _odd_registry(conn)
    view = RepeatablesView(conn, Q)
    try:
        assert "error" not in view.status.value and "6 repeatables" in view.summary.value
        due = view.frame["next due"]
        assert due.isna().tolist() == [True, False, False, True, True, True]
        assert (view.frame.loc["n\udcff\udcfe", "problem"] or None) == ODD_PROBLEM[backend]
        if ODD_PROBLEM[backend] is None:
            assert view.frame.loc["n\udcff\udcfe", "payload"] == "\udcff\udcfe"
        assert ("n\\xff\\xfe", "n\udcff\udcfe") in view.name.options
    finally:
        view.close()


def test_the_repeats_verb_shows_odd_times_blank_and_odd_bytes_as_read(emq_line, conn, backend):
    _odd_registry(conn)
    table = emq_line(f"repeats {Q}")
    assert table["next_due"].isna().tolist() == [True, False, False, True, True, True]
    if ODD_PROBLEM[backend] is None:
        assert table.loc["n\udcff\udcfe", "group"] == "g\udcff"
    else:
        assert table.loc["n\udcff\udcfe", "problem"] == ODD_PROBLEM[backend]


@pytest.mark.parametrize("name", ["far", "huge", "ancient"])
def test_run_now_of_a_repeatable_due_at_an_odd_time_says_its_job(emq_line, conn, capsys, name):
    _odd_registry(conn)
    job = emq_line(f"run-now {Q} {name}")
    assert conn.client.hget(P + "job:" + job, "payload") == "{}"
    assert "next due unchanged" in capsys.readouterr().out


# -- Do no harm, reading a definition: cjson builds a Lua value for each JSON value, so a definition
# another node wrote of 1 MiB of `{},{},...` decoded whole held Valkey 99 ms in one tick. One over
# SHAPED_FROM bytes is read in its shape (`shaped`, lua/includes/ repeat_shape.lua: plain fields
# around one payload string, only the payload decoded); one of another shape is decoded whole up to
# WHOLE_BYTES (counted DECODE_WORK times a byte against a tick's budget), and past it not read
# (`shape`). Both backends.
Q_repeat_reader = "reader"
P_repeat_reader = f"emq:{{{Q_repeat_reader}}}:"
INCLUDES = scripts.lua_dir() / "includes"


def constant(name: str) -> int:
    said = re.search(rf"^local {name} = (\d+)$", (INCLUDES / "repeat_def.lua").read_text(), re.M)
    assert said is not None
    return int(said.group(1))


SHAPED_FROM, WHOLE_BYTES = constant("SHAPED_FROM"), constant("WHOLE_BYTES")

# the reader alone: `shaped` and a whole decode of one text, each as a sorted dump
PROBE = (
    scripts.fragment("repeat_def")
    + """
local function dump(d)
  if not d then return 'none' end
  local keys, out = {}, {}
  for k in pairs(d) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v, t = d[k], type(d[k])
    if v == cjson.null then v, t = 'null', 'null' end
    if t == 'number' then v = string.format('%.17g', v) end
    out[#out + 1] = k .. '=' .. t .. ':' .. tostring(v)
  end
  return table.concat(out, '|')
end
local ok, whole = pcall(cjson.decode, ARGV[1])
if not ok or type(whole) ~= 'table' then whole = nil end
local def, bad = readable(ARGV[1])
return {dump(shaped(ARGV[1])), dump(whole), tostring(bad)}
"""
)

# the layouts a definition has: register's, the script's before it (cjson's key order
# on Valkey, with `\/`; on the fake, every character past ASCII as \uXXXX), by hand;
# each (before the payload, after it, how the payload is written)
LAYOUTS = [
    (
        '{"every":60000,"payload":',
        ',"group":"","max_attempts":"1"}',
        lambda p: json.dumps(p, ensure_ascii=False),
    ),
    (
        '{"max_attempts":"3","group":"acme","payload":',
        ',"every":60000}',
        lambda p: json.dumps(p).replace("/", "\\/"),
    ),
    ('{"every":60000,"max_attempts":"3","group":"","payload":', "}", json.dumps),
    (' {\n "every" : 1000 ,\t"payload" : ', ' , "group" : "g" , "max_attempts" : 2 } ', json.dumps),
    ('{"payload":', "}", json.dumps),
    ('{"payload":', ',"every":-1e3,"every":5,"payload":7}', json.dumps),
    ('{"every":1.5e3,"payload":', ',"x":true,"y":false,"z":null,"group":null}', json.dumps),
]
# definitions of another shape: decoded whole, or not read
OTHER_SHAPES = [
    ('{"every":1,"payload":', ',"x":[1]}', json.dumps),
    ('{"every":1,"payload":', ' "x":1}', json.dumps),
    ('{"every":1,"payload":', ",}", json.dumps),
    ('{"every":1,"payload":', ',"a\\"b":1}', json.dumps),
    ('{"every":1,"meta":{"owner":"x"},"payload":', "}", json.dumps),
]


def written_in(layout, payload: str) -> str:
    before, after, written = layout
    return before + written(payload) + after


TRICKY = ["", "{}", '{"a": "b/c"}', 'x"y', "back\\slash", "ends with \\", 'ends with "', '","every":5,"z":"']
TRICKY += ["\u00e9\u20ac\U0001f600", "\x01\x7f", 'a\\"b', "\\\\", '"', "}", '{"payload":"x"}']


def payloads() -> list[str]:
    rnd = random.Random(27)
    made = [*TRICKY]
    for _ in range(60):
        made.append("".join(rnd.choice('ab"\\,:{}[] \u00e9/\n') for _ in range(rnd.randint(0, 24))))
    return made


def probe(conn, text: str) -> list[str]:
    return conn.client.eval(PROBE, 0, text)


def test_a_shaped_definition_reads_as_cjson_reads_it_whole(conn):
    """Every definition `shaped` reads is the table cjson.decode makes of it; every one
    in a writer's layout is read so, whatever its payload holds."""
    checked = 0
    for p in payloads():
        for layout in LAYOUTS:
            shaped, whole, _ = probe(conn, written_in(layout, p))
            assert shaped == whole != "none", written_in(layout, p)
            checked += 1
        for layout in OTHER_SHAPES:
            shaped, whole, _ = probe(conn, written_in(layout, p))
            assert shaped in ("none", whole), written_in(layout, p)
    assert checked == 7 * len(payloads())


@pytest.mark.parametrize("layout", range(4))
@pytest.mark.parametrize(
    "payload", ['{"q": "\\"quoted\\" a/b"}', "e\u0301t\u00e9 \u20ac \U0001f600", "ends \\"]
)
def test_a_long_definition_of_every_writers_layout_makes_its_job(harm, layout, payload):
    conn, srv = harm
    long = payload + "x" * (4 * SHAPED_FROM)
    text = written_in(LAYOUTS[layout], long)
    conn.client.zadd(P_repeat_reader + "repeat", {"long": 0})
    conn.client.hset(P_repeat_reader + "repeat:defs", "long", text)
    [job] = bounded(lambda: repeat.tick(conn, Q_repeat_reader), srv, what="tick")
    assert conn.client.hget(P_repeat_reader + "job:" + job, "payload") == long
    assert [r["problem"] for r in repeat.registered(conn, Q_repeat_reader)] == [None]
    assert repeat.run_now(conn, Q_repeat_reader, "long")


def dense(n: int) -> str:
    """A definition of `n` bytes or so of small values another node wrote: a JSON object
    whose decode builds a Lua value every 3 bytes."""
    return '{"every": 1000, "payload": "{}", "x": [' + ",".join(["{}"] * (n // 3)) + "]}"


def test_a_long_definition_of_another_shape_is_not_decoded_and_says_shape(harm):
    conn, srv = harm
    conn.client.zadd(P_repeat_reader + "repeat", {"dense": 0, "good": 1})
    big = dense(repeat.DEF_BYTES - 100)
    conn.client.hset(
        P_repeat_reader + "repeat:defs", mapping={"dense": big, "good": '{"every":1000,"payload":"ok"}'}
    )
    assert probe(conn, dense(WHOLE_BYTES + 10))[2] == "shape"
    with Events(conn, Q_repeat_reader) as events:
        made = bounded(lambda: repeat.tick(conn, Q_repeat_reader), srv, what="tick")
        made += bounded(lambda: repeat.tick(conn, Q_repeat_reader), srv, what="tick")
    # its bytes counted as read (the call ends after it), the good one made by the next
    assert [conn.client.hget(P_repeat_reader + "job:" + j, "payload") for j in made] == ["ok"]
    assert [e["error"] for e in events.seen if e["event"] == "bad_row"] == ["bad definition shape"]
    assert conn.client.hget(P_repeat_reader + "repeat:defs", "dense") == big
    # a listing says what the tick found, asking the server (one rule): JSON an object
    # of every field, yet no tick reads it
    assert {r["name"]: r["problem"] for r in repeat.registered(conn, Q_repeat_reader)} == {
        "dense": "bad shape",
        "good": None,
    }


def test_a_short_definition_of_another_shape_is_decoded_whole_and_counted_so(harm):
    """One of another shape at most WHOLE_BYTES is read whole (a field of a nested value
    another node added is no harm), counted DECODE_WORK times its bytes: a tick's byte
    budget holds one of WHOLE_BYTES, so the one behind it waits for the next call."""
    conn, srv = harm
    meta = [{"n": i} for i in range(4_000)]
    pad = WHOLE_BYTES - len(json.dumps({"every": 1000, "payload": "", "meta": meta}))
    nested = json.dumps({"every": 1000, "payload": "n" * pad, "meta": meta})
    assert len(nested) == WHOLE_BYTES
    conn.client.zadd(P_repeat_reader + "repeat", {"nested": 0, "next": 1})
    conn.client.hset(
        P_repeat_reader + "repeat:defs", mapping={"nested": nested, "next": '{"every":1000,"payload":"next"}'}
    )
    first = bounded(lambda: repeat.tick(conn, Q_repeat_reader), srv, what="tick")
    second = bounded(lambda: repeat.tick(conn, Q_repeat_reader), srv, what="tick")
    payloads = [conn.client.hget(P_repeat_reader + "job:" + j, "payload") for j in first + second]
    assert (len(first), payloads) == (1, ["n" * pad, "next"])
    assert [r["problem"] for r in repeat.registered(conn, Q_repeat_reader)] == [None, None]


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ('{"every": 0, "payload": "%s"}', "every"),
        ('{"every": 1000, "payload": 7, "pad": "%s"}', "payload"),
        ('{"every": 1000, "payload": "%s", "group": 3}', "group"),
        ('{"every": 1000, "payload": "%s", "max_attempts": "three"}', "max_attempts"),
        ('{"every": 1000, "payload": "%s" "x": 1}', "definition"),
    ],
)
def test_a_long_shaped_definition_is_checked_as_a_short_one(conn, text, bad):
    assert probe(conn, text % ("p" * 2 * SHAPED_FROM))[2] == bad
    assert probe(conn, text % "p")[2] == bad


# -- Do no harm, the tick: bad definitions another node wrote, due before the good ones, hold them
# back a call per `TICK_NAMES` of them, never for ever (each call walks on from the place the one
# before answered, and from the head again at the due names' end), and each is reported by one
# `bad_row` event while it stays as it is, at most `TICK_REPORTS` a call. Both backends, under the
# harness's watchdog (tests/harm.py).
Q_repeat_tick = "ticks"
P_repeat_tick = f"emq:{{{Q_repeat_tick}}}:"
REPORTED = P_repeat_tick + "repeat:reported"
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


def written_repeat_tick(conn, defs: dict[str, str], due) -> None:
    """Repeatables written straight into the registry, as another node may have."""
    pipe = conn.client.pipeline(transaction=False)
    for k, (name, d) in enumerate(defs.items()):
        pipe.zadd(P_repeat_tick + "repeat", {name: due(k)})
        pipe.hset(P_repeat_tick + "repeat:defs", name, d)
        if k % 500 == 499:
            pipe.execute()
    pipe.execute()


def bad_defs(n: int, over: int = 0) -> dict[str, str]:
    """`n` bad definitions of every kind, the first `over` of them over DEF_BYTES."""
    return {f"bad_{i:04d}": OVER if i < over else BAD_KINDS[i % len(BAD_KINDS)] for i in range(n)}


def good_defs(n: int) -> dict[str, str]:
    return {f"good_{i}": f'{{"every": 3600000, "payload": "job {i}"}}' for i in range(n)}


def tick(conn, srv, max_jobs: int = 10) -> list[str]:
    return bounded(lambda: repeat.tick(conn, Q_repeat_tick, max_jobs=max_jobs), srv, what="tick")


def reports(events: Events) -> list[str]:
    return [e["repeat"] for e in events.seen if e["event"] == "bad_row"]


# -- bad definitions ahead hold the good ones back a call per TICK_NAMES, not for ever --------


def test_good_repeatables_behind_1000_bad_ones_each_make_one_job_within_three_ticks(harm):
    conn, srv = harm
    bad, good = bad_defs(1_000, over=4), good_defs(10)
    written_repeat_tick(conn, bad, due=lambda k: 1_000 + k)
    written_repeat_tick(conn, good, due=lambda k: 5_000 + k)
    before = {n: conn.client.zscore(P_repeat_tick + "repeat", n) for n in bad}
    # the bad ones are examined TICK_NAMES a call, then the good ones behind them
    bound = math.ceil(len(bad) / repeat.TICK_NAMES) + 1
    assert bound == 3
    made, per_call = [], []
    for _ in range(bound):
        with Events(conn, Q_repeat_tick) as events:
            made += tick(conn, srv)
        per_call.append(len(reports(events)))
    payloads = sorted(conn.client.hget(P_repeat_tick + "job:" + j, "payload") for j in made)
    assert payloads == sorted(f"job {i}" for i in range(10))  # one job each, within the bound
    assert all(n <= repeat.TICK_REPORTS for n in per_call), per_call
    # the bad ones left as they were: their definitions and their due times
    assert {n: conn.client.zscore(P_repeat_tick + "repeat", n) for n in bad} == before
    assert conn.client.hget(P_repeat_tick + "repeat:defs", "bad_0005") == bad["bad_0005"]
    assert conn.client.hstrlen(P_repeat_tick + "repeat:defs", "bad_0000") == len(OVER)
    # and the good ones are not due again for an hour: the ticks after make nothing
    for _ in range(3):
        assert tick(conn, srv) == []


def test_a_repeatable_due_before_the_place_is_made_when_the_walk_goes_round(harm):
    conn, srv = harm
    written_repeat_tick(conn, bad_defs(repeat.TICK_NAMES + 100), due=lambda k: 1_000 + k)
    assert tick(conn, srv) == [] and repeat._PLACES[conn][Q_repeat_tick] == repeat.TICK_NAMES
    # due at the head, behind the place: the walk meets the due names' end after 100
    # names and goes on from the head in the same call
    written_repeat_tick(conn, good_defs(1), due=lambda k: 1)
    [job] = tick(conn, srv)
    assert conn.client.hget(P_repeat_tick + "job:" + job, "payload") == "job 0"
    # the good one put the rest a rank further: 101 names from the place, then 399 from
    # the head (the good one and 398 bad ones): the next call goes on after them
    assert repeat._PLACES[conn][Q_repeat_tick] == repeat.TICK_NAMES - 101 - 1


def test_a_place_past_the_due_names_starts_the_walk_at_the_head(harm):
    conn, srv = harm
    written_repeat_tick(conn, good_defs(2), due=lambda k: 1_000 + k)
    repeat._PLACES.setdefault(conn, {})[Q_repeat_tick] = 10**12  # the registry changed since
    assert len(tick(conn, srv)) == 2
    assert repeat._PLACES[conn][Q_repeat_tick] == 0


def test_the_place_must_be_a_whole_number():
    conn = emq.connect(embedded="fake")
    with pytest.raises(EMQError, match="place"):
        conn.run("repeat_tick", [P_repeat_tick], ["-1", "j_1"], verb="tick", queue=Q_repeat_tick)


# -- each bad definition reported once while it stays as it is --------------------------------


def test_each_bad_definition_is_reported_once_at_most_tick_reports_a_call(harm):
    conn, srv = harm
    bad = {f"bad_{i:02d}": f"not json {i}" for i in range(50)}
    written_repeat_tick(conn, bad, due=lambda k: 1_000 + k)
    per_call, seen = [], []
    for _ in range(5):
        with Events(conn, Q_repeat_tick) as events:
            assert tick(conn, srv) == []
        per_call.append(len(reports(events)))
        seen += reports(events)
    assert per_call == [20, 20, 10, 0, 0] and repeat.TICK_REPORTS == 20
    assert sorted(seen) == sorted(bad)  # each once, in due order
    assert conn.client.hlen(REPORTED) == 50
    # another content is reported once again; the same content never
    conn.client.hset(P_repeat_tick + "repeat:defs", "bad_07", "[still bad]")
    with Events(conn, Q_repeat_tick) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert reports(events) == ["bad_07"]
    # made good, its report is forgotten: bad again (as it was) it is reported again
    conn.client.hset(P_repeat_tick + "repeat:defs", "bad_07", '{"every": 1, "payload": "now good"}')
    [job] = tick(conn, srv)
    assert conn.client.hget(P_repeat_tick + "job:" + job, "payload") == "now good"
    assert not conn.client.hexists(REPORTED, "bad_07")
    conn.client.hset(P_repeat_tick + "repeat:defs", "bad_07", "[still bad]")
    conn.client.zadd(P_repeat_tick + "repeat", {"bad_07": 0})
    with Events(conn, Q_repeat_tick) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert reports(events) == ["bad_07"]


def test_a_long_bad_definition_is_known_by_its_problem_length_and_ends(harm):
    """What a report remembers of a definition: its problem, its length, its first and
    last 32 bytes. A change of its length is reported; one in its middle alone is not."""
    conn, srv = harm
    written_repeat_tick(conn, {"long": "[" + "x" * 1_000}, due=lambda k: 0)
    with Events(conn, Q_repeat_tick) as events:
        for text in ("[" + "x" * 1_000, "[" + "x" * 1_001, "[" + "x" * 500 + "y" + "x" * 500):
            conn.client.hset(P_repeat_tick + "repeat:defs", "long", text)
            for _ in range(2):
                tick(conn, srv)
    assert reports(events) == ["long", "long"]


def test_register_and_unregister_forget_a_report(harm):
    conn, srv = harm
    written_repeat_tick(conn, {"a": "nope", "b": "nope"}, due=lambda k: 0)
    tick(conn, srv)
    assert sorted(conn.client.hkeys(REPORTED)) == ["a", "b"]
    repeat.register(conn, Q_repeat_tick, "a", 60_000, "{}")
    assert repeat.unregister(conn, Q_repeat_tick, "b")
    assert conn.client.hkeys(REPORTED) == []


def test_the_reports_are_forgotten_when_they_name_more_than_the_registry(harm):
    """Another node took bad repeatables out by hand: the reports naming them would stay
    for ever, so once they outnumber the registry they are emptied and made again."""
    conn, srv = harm
    bad = {f"bad_{i:02d}": "nope" for i in range(30)}
    written_repeat_tick(conn, bad, due=lambda k: 1_000 + k)
    tick(conn, srv)
    tick(conn, srv)
    assert conn.client.hlen(REPORTED) == 30
    gone = [f"bad_{i:02d}" for i in range(5)]
    conn.client.zrem(P_repeat_tick + "repeat", *gone)
    conn.client.hdel(P_repeat_tick + "repeat:defs", *gone)
    with Events(conn, Q_repeat_tick) as events:
        tick(conn, srv)
        tick(conn, srv)
    assert sorted(reports(events)) == sorted(set(bad) - set(gone))
    assert conn.client.hlen(REPORTED) == 25


def test_a_reports_key_of_another_type_is_left_and_each_tick_reports_at_most_tick_reports(harm):
    conn, srv = harm
    conn.client.set(REPORTED, "mine")
    written_repeat_tick(conn, bad_defs(30), due=lambda k: 1_000 + k)
    written_repeat_tick(conn, good_defs(1), due=lambda k: 5_000)
    with Events(conn, Q_repeat_tick) as events:
        made = tick(conn, srv)
    assert len(made) == 1 and len(reports(events)) == repeat.TICK_REPORTS
    assert conn.client.get(REPORTED) == "mine"


def test_a_queue_with_reports_is_obliterated_to_nothing(harm):
    conn, srv = harm
    written_repeat_tick(conn, bad_defs(3), due=lambda k: 0)
    tick(conn, srv)
    assert conn.client.exists(REPORTED)
    admin.pause(conn, Q_repeat_tick)
    admin.obliterate_all(conn, Q_repeat_tick)
    assert list(conn.client.scan_iter(match=P_repeat_tick + "*")) == []


def test_the_scripts_report_bound_is_the_clients():
    said = re.search(r"^local TICK_REPORTS = (\d+)$", scripts.source("repeat_tick"), re.M)
    assert said is not None and int(said.group(1)) == repeat.TICK_REPORTS


# -- The repeat tick against a `repeat:reported` hash another node filled (the second hostile pass,
# lua/repeat_tick.lua): a report is compared by its length before it is read, so a long one is never
# copied (100 reports of 4 MB held a tick 279 ms, bench/hostile_claims.py). Both backends; work is
# observed as the bytes the tick's reading commands copied (harm.ScriptReads), never
# timed.
Q_repeat = "ticks"
P_repeat = f"emq:{{{Q_repeat}}}:"
REPORTED_repeat = P_repeat + "repeat:reported"


def test_long_reports_another_node_wrote_are_never_copied(harm, monkeypatch):
    conn, srv = harm
    names = [f"bad_{i:02d}" for i in range(20)]
    pipe = conn.client.pipeline(transaction=False)
    for name in names:
        pipe.zadd(P_repeat + "repeat", {name: 0})
        pipe.hset(P_repeat + "repeat:defs", name, "not json")
        pipe.hset(REPORTED_repeat, name, "r" * 1_000_000)
    pipe.execute()
    reads = ScriptReads(conn, srv, monkeypatch, "repeat_tick")
    with Events(conn, Q_repeat) as events:
        repeat.tick(conn, Q_repeat)
    # each definition read (8 bytes) and no report: each was measured first (HSTRLEN)
    assert [c[1] for c in reads.calls[0]] == [P_repeat + "repeat:defs"] * len(names)
    assert reads.copied() == [8 * len(names)]
    # each is reported again (its report was another's), TICK_REPORTS a call
    assert len([e for e in events.seen if e["event"] == "bad_row"]) == repeat.TICK_REPORTS
    assert conn.client.hstrlen(REPORTED_repeat, names[0]) < 200
