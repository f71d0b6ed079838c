"""Do no harm, ids another node wrote long: a move can count a member's id only after
it has read it, so what a call reads of a set must follow what its byte budget may
still spend, not its budget of members. Both backends, each call under the harness's
watchdog (tests/harm.py); what a call reads is counted from the set reads its script
sends (MONITOR on Valkey, a spy on the embedded server), never timed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import fakeredis
import pytest
import redis
from dead_letters import long_ids, written_dead, written_rows
from harm import Events, bounded, replies
from helpers import notebook_html

from emq_notebook import admin, frames, jobs, runbook, triage
from emq_notebook.keyspace import MAX_SERVER_ID

Q = "longid"
P = f"emq:{{{Q}}}:"
# a whole set read, as a count of members (a ZRANGE to -1, a ZRANGEBYSCORE with no LIMIT)
WHOLE = 10**9
# the set reads by rank or score a script may send; SORT_RO reads rows by a set's ranks
JOB_SETS = ("pending", "active", "schedule", "dead")
SET_READS = {"zrange", "zrangebyscore", "zrevrange", "zrevrangebyscore", "sort_ro", "sort"}


def asked(words: list[str]) -> int:
    """The members one read of a queue's job set asks for: its LIMIT count, else its
    rank range (0 for a read of another key: the latency history's index)."""
    if not words[1].endswith(JOB_SETS):
        return 0
    up = [w.upper() for w in words]
    if "LIMIT" in up:
        return int(words[up.index("LIMIT") + 2])
    if up[0] in ("ZRANGE", "ZREVRANGE") and not {"BYSCORE", "BYLEX"} & set(up):
        first, last = int(words[2]), int(words[3])
        return WHOLE if last < 0 else max(0, last - first + 1)
    return WHOLE


def set_reads(conn, srv, call: Callable[[], Any]) -> tuple[Any, list[int]]:
    """What `call()` answers, and the members each set read its scripts sent asked for."""
    if srv is None:
        return _spied(call)
    return _monitored(srv, call)


def _spied(call: Callable[[], Any]) -> tuple[Any, list[int]]:
    seen: list[int] = []
    mixin = fakeredis.commands_mixins.scripting_mixin.ScriptingCommandsMixin
    real = mixin._lua_redis_call

    def spy(self, runtime, expected, op, *args):
        words = [x.decode() if isinstance(x, bytes) else str(x) for x in (op, *args[:12])]
        if words[0].lower() in SET_READS:
            seen.append(asked(words))
        return real(self, runtime, expected, op, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mixin, "_lua_redis_call", spy)
        return call(), seen


END = "idattack-monitor-end"


def _monitored(srv, call: Callable[[], Any]) -> tuple[Any, list[int]]:
    seen: list[int] = []
    client = redis.Redis(host="127.0.0.1", port=srv.port, decode_responses=True)
    ready = threading.Event()

    def watch() -> None:
        with client.monitor() as m:
            ready.set()
            for event in m.listen():
                words = event["command"].split(" ")[:12]
                if words[0] == "ECHO" and END in event["command"]:
                    return
                if event.get("client_type") == "lua" and words[0].lower() in SET_READS:
                    seen.append(asked(words))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    ready.wait(5)
    try:
        return call(), seen
    finally:
        client.echo(END)
        watcher.join(10)


def foreign_ids(n: int) -> list[str]:
    """`n` ids another node wrote, each over MAX_SERVER_ID bytes: foreign."""
    return long_ids(n, MAX_SERVER_ID + 4_000)


def written(conn, key: str, ids: list[str], first: int = 1) -> None:
    """Rows in set `key` as another node writes them, not tried yet (a dead one too)."""
    not_tried = {"attempts": "0", "failures": None, "max_attempts": None, "last_error": None}
    written_rows(conn, Q, key, ids, first=first, **not_tried)


GOOD = [f"ok_{i}" for i in range(5)]
LONG = 12


def lap(step: Callable[[], int]) -> int:
    """`step()` called until the jobs behind the long ids moved (one lap: a lap
    announces each id it leaves once); the sum of what it answers."""
    moved = 0
    for _ in range(LONG + len(GOOD) + 1):
        moved += step()
        if moved >= len(GOOD):
            break
    return moved


# verb: (the set it walks, the run, what stays in the set)
MOVES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "reprocess_dead": ("dead", lambda conn: admin.reprocess_dead(conn, Q)),
    "reprocess_dead dry run": ("dead", lambda conn: admin.reprocess_dead(conn, Q, dry_run=True)),
    "reprocess_dead limit 3": ("dead", lambda conn: admin.reprocess_dead(conn, Q, limit=3)),
    "promote": ("schedule", lambda conn: lap(lambda: jobs.promote(conn, Q))),
    "expire": ("active", lambda conn: lap(lambda: jobs.expire_leases(conn, Q))),
    "drain": ("pending", lambda conn: admin.drain(conn, Q)),
    "obliterate": ("dead", lambda conn: admin.obliterate_all(conn, Q, force=True)),
}


@pytest.mark.parametrize("verb", sorted(MOVES))
def test_a_move_past_long_ids_reads_a_set_a_chunk_at_a_time(harm, verb):
    """Twelve ids of 69 KB at the head of the set, then five jobs: an id costs a move
    16 times its bytes, so a call examines one of them, and the set read it sends must
    ask for no more than that: a call that read its budget of members first (501) copied
    35 MB out of the set to examine 70 KB (34 ms on Valkey for 300 such ids). Every
    long id is reported once, never moved, and the jobs behind them move."""
    conn, srv = harm
    key, run = MOVES[verb]
    foreign = foreign_ids(LONG)
    written(conn, key, foreign)
    written(conn, key, GOOD, first=100)
    if verb == "obliterate":
        conn.client.hset(P + "meta", "paused", "1")
    with Events(conn, Q) as events:
        done, reads = set_reads(conn, srv, lambda: bounded(lambda: run(conn), srv, what=verb))
    # a call examines one long id, or the five jobs: it reads a chunk at a time (1, 2,
    # 4...), never a budget's worth of members
    assert reads and max(reads) <= len(GOOD), reads
    left = conn.client.zrange(P + key, 0, -1)
    if verb in ("drain", "obliterate"):
        assert left == []
        assert all(conn.client.exists(P + "job:" + i) for i in foreign) == (verb == "drain")
        return
    moving = verb != "reprocess_dead dry run"
    moved = 3 if verb.endswith("limit 3") else len(GOOD)
    assert done == moved
    assert left == foreign + (GOOD[moved:] if moving else GOOD)
    clipped = [i[:200] + f"... ({len(i)} bytes)" for i in foreign]
    if verb.startswith("reprocess_dead"):
        assert done.foreign == clipped
    if moving:
        assert sorted(e["job"] for e in events.seen if e["event"] == "bad_row") == clipped


def test_an_id_of_max_server_id_bytes_of_multibyte_characters_moves_and_one_byte_more_stays(harm):
    """The byte length decides, on both sides: 21,845 three-byte characters and one
    byte are 65,536 bytes (moved); one more byte is foreign (left, reported clipped to
    its first whole characters within 200 bytes)."""
    conn, srv = harm
    edge = "€" * 21_845 + "a"
    over = "€" * 21_845 + "ab"
    assert len(edge.encode()) == MAX_SERVER_ID and len(over.encode()) == MAX_SERVER_ID + 1
    written_dead(conn, Q, [edge, over])
    moved = bounded(lambda: admin.reprocess_dead(conn, Q), srv, what="reprocess_dead")
    assert moved == 1
    assert conn.client.zrange(P + "pending", 0, -1) == [edge]
    assert conn.client.zrange(P + "dead", 0, -1) == [over]
    # its head whole characters: 66 euro signs (198 bytes), not 200 bytes ending mid-sign
    assert moved.foreign == ["€" * 66 + f"... ({MAX_SERVER_ID + 1} bytes)"]
    assert admin.remove_jobs(conn, Q, [over, edge]) == {over: "foreign_id", edge: "removed"}


@pytest.mark.parametrize("verb", ["reprocess_dead", "drain"])
def test_a_chunk_after_short_ids_asks_for_at_most_eight_members(harm, verb):
    """A move learns an id's length only by reading it: 60 short members, then long ids.
    The chunks grow 1, 2, 4, 8 and stay there, so the chunk that meets the long ids
    copies at most 7 of them past the one that ends the step (at 64 a chunk, 63 ids of
    1 MB held Valkey 123 ms; at 8, 7 of them 13 ms)."""
    conn, srv = harm
    key, run = MOVES[verb]
    short = [f"s_{i:03d}" for i in range(60)]
    pipe = conn.client.pipeline(transaction=False)
    for i, job_id in enumerate(short):  # rows no transition reads (left) or drains
        pipe.hset(P + "job:" + job_id, mapping={"payload": "{}", "attempts": "three"})
        pipe.zadd(P + key, {job_id: i})
    pipe.execute()
    written(conn, key, foreign_ids(LONG), first=100)
    _, reads = set_reads(conn, srv, lambda: bounded(lambda: run(conn), srv, what=verb))
    assert reads and max(reads) <= 8, reads
    assert conn.client.zcard(P + key) == (0 if verb == "drain" else len(short) + LONG)


# a read of every dead row: the scan of a find, and of the error signatures
SCANS: dict[str, Callable[[Any], Any]] = {
    "find": lambda conn: triage.find(conn, Q, min_attempts=1),
    "errors": lambda conn: triage.errors(conn, Q),
}


@pytest.mark.parametrize("verb", sorted(SCANS))
def test_a_scan_after_short_rows_asks_for_at_most_eight_members(harm, verb):
    """A find or an errors scan reads rows a chunk at a time, and the chunk that meets
    long ids after short rows builds a key of each for every field it reads: at 64 a
    chunk, 64 ids of 1 MB after 63 short rows held Valkey 111 ms in one find step."""
    conn, srv = harm
    written_dead(conn, Q, [f"s_{i:03d}" for i in range(60)])
    written(conn, "dead", foreign_ids(LONG), first=10**6)
    _, reads = set_reads(conn, srv, lambda: bounded(lambda: SCANS[verb](conn), srv, what=verb))
    assert reads and max(reads) <= 8, reads


# the readers of a page of ids: a snapshot's pages, a completion's 300 ids
PAGES: dict[str, Callable[[Any], Any]] = {
    "snapshot": lambda conn: list(frames.snapshot(conn, Q, states="dead").index),
    "completion": lambda conn: frames.members_page(conn, P + "dead", 0, 300)[0],
    # a runbook's sample of a state: its first ids
    "runbook sample": lambda conn: runbook.members(conn, Q, "dead", n=400)[1],
}


@pytest.mark.parametrize("reader", sorted(PAGES))
def test_a_page_of_ids_after_short_ones_asks_for_at_most_eight_long_ones_a_read(harm, reader):
    """A page is read by `@read_members`, a chunk at a time within a byte budget: one
    ZRANGE of 300 ids (100 short, then ids of 69 KB) copied them all at once (with ids
    of 1 MB, 176 ms)."""
    conn, srv = harm
    short = [f"s_{i:03d}" for i in range(100)]
    written(conn, "dead", short)
    written(conn, "dead", foreign_ids(LONG), first=10**6)
    client_side: list[tuple] = []
    real = conn.command

    def command(*parts):
        if str(parts[0]).upper().startswith(("ZRANGE", "ZREVRANGE")):
            client_side.append(parts[:4])
        return real(*parts)

    conn.command = command
    got, reads = set_reads(conn, srv, lambda: bounded(lambda: PAGES[reader](conn), srv, what=reader))
    assert got[:100] == short and len(got) == 100 + LONG
    assert client_side == [] and reads and max(reads) <= 8, (client_side, reads)


def test_a_frame_shows_an_id_another_node_made_long_clipped(conn, ip, capsys):
    """A snapshot keeps each id as read (a 70 KB one too: written back, it is the same
    member), but the `emq` shell, a notebook's HTML and a grid show it as its first 200
    characters and its length, as a move reports it: no 70 KB line, no 70 KB cell, no
    70 KB row header in a grid."""
    from emq_notebook import cli, frames
    from emq_notebook.widgets import grid

    long = foreign_ids(1)[0]
    written(conn, "dead", [long, "ok_1"])
    frame = frames.snapshot(conn, Q, "dead")
    assert list(frame.index) == [long, "ok_1"]
    clipped = long[:200] + f"... ({len(long)} bytes)"
    cli.show(frame)
    printed = capsys.readouterr().out
    assert clipped in printed and "ok_1" in printed
    assert max(map(len, printed.splitlines())) < 1_000
    html = notebook_html(ip, frame)
    assert clipped in html and long not in html
    assert list(grid.shown(frame).index) == [clipped, "ok_1"]
    assert list(frame.index) == [long, "ok_1"]


@pytest.mark.parametrize("verb", ["remove_jobs", "reprocess_jobs"])
@pytest.mark.parametrize("char", ["a", "\N{GRINNING FACE}"])
def test_a_verb_by_id_sends_a_call_about_the_ids_it_can_take(harm, verb, char):
    """A script counts an id 16 times its bytes, so a call takes about one id of 64 KB:
    ids sent past what it takes go again with the next call. Counted by characters,
    once, a call was sent 16 ASCII ids of 64 KB (64 of four-byte characters: 4 MB a
    call, 10 ms of the server's time to parse) to take one. Each call is sent about
    what it takes, and every id is answered."""
    conn, srv = harm
    per = MAX_SERVER_ID // len(char.encode())
    ids = [f"{i:04d}" + char * (per - 4 // len(char.encode()) - 1) for i in range(6)]
    ids = [i + "a" * (MAX_SERVER_ID - len(i.encode())) for i in ids]
    assert {len(i.encode()) for i in ids} == {MAX_SERVER_ID}
    written_dead(conn, Q, ids)
    sent: list[tuple[int, int]] = []
    real = conn.run

    def run(name, keys, args=(), **kw):
        reply = real(name, keys, args, **kw)
        if name == verb:
            sent.append((len(args) - 2, len(reply)))
        return reply

    conn.run = run
    words = bounded(lambda: getattr(admin, verb)(conn, Q, ids), srv, what=verb)
    assert set(words.values()) == {"removed" if verb == "remove_jobs" else "reprocessed"}
    # each call is answered for what it was sent, within one id
    assert all(n - answered <= 1 for n, answered in sent), sent
    assert sum(n for n, _ in sent) <= len(ids) + len(sent)


def test_the_id_rules_are_the_same_numbers_in_python_and_lua():
    """What a script counts for an id and the longest id it addresses are written once,
    in Python (the caller sizes its calls and refuses ids by them), and rendered into
    every script that includes `reads`."""
    import re

    from emq_notebook import defaults, scripts

    reads = scripts.fragment("reads")
    assert re.search(r"^local ID_WORK = (\d+)$", reads, re.M).group(1) == str(defaults.ID_WORK)
    assert re.search(r"^local MAX_ID = (\d+)$", reads, re.M).group(1) == str(MAX_SERVER_ID)
    files = scripts.lua_dir().rglob("*.lua")
    assert not any(re.search(r"^local (ID_WORK|MAX_ID) =", p.read_text(), re.M) for p in files)


def test_a_bad_row_event_names_its_long_id_whole_once_and_clipped_in_its_error(harm):
    """A bad row whose id (another node's) is 60 KB of bytes that are not UTF-8: its
    event carries the id whole in `job` (a person may remove that job by it) and clipped
    in `error`, the refusal's text, so the event's repair to UTF-8 text runs over the
    id once, not twice."""
    conn, srv = harm
    raw = b"\xff" * 60_000
    job_id = raw.decode("utf-8", "surrogateescape")
    conn.client.hset(P.encode() + b"job:" + raw, mapping={"payload": "{}", "attempts": "three"})
    conn.client.zadd(P.encode() + b"dead", {raw: 1})
    with Events(conn, Q) as events:
        moved = bounded(lambda: admin.reprocess_dead(conn, Q), srv, what="reprocess_dead")
    assert (moved, moved.bad_rows) == (0, 1)
    (event,) = [e for e in events.seen if e["event"] == "bad_row"]
    assert event["job"] == "\\xff" * 60_000
    assert event["error"] == "EMQSTATE bad row attempts in " + "\\xff" * 200 + "... (60000 bytes)"
    assert conn.client.zrange(P + "dead", 0, -1) == [job_id]


@pytest.mark.parametrize("verb", ["reprocess_dead", "promote", "drain"])
def test_foreign_ids_at_the_head_hold_the_jobs_behind_them_a_few_calls(harm, verb):
    """A foreign id names no key and is reported clipped: a move only reads it, so it
    costs its bytes once. Counted as an id addressed (16 times), each call passed one
    id of 69 KB: 30 of them held the jobs behind them 30 calls (a worker's promote: 30
    of its loops; 10,000 such ids, 10,000 loops). A call now passes about 15."""
    conn, srv = harm
    key = {"reprocess_dead": "dead", "promote": "schedule", "drain": "pending"}[verb]
    written(conn, key, foreign_ids(30))
    written(conn, key, GOOD, first=100)
    calls = replies(conn, verb)
    if verb == "promote":
        bounded(lambda: lap(lambda: jobs.promote(conn, Q)), srv, what=verb)
    else:
        bounded(lambda: getattr(admin, verb)(conn, Q), srv, what=verb)
    assert len(calls) <= 3, len(calls)
    left = conn.client.zcard(P + key)
    assert left == (0 if verb == "drain" else 30)
