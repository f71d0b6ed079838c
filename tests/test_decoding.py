"""How text from the server is decoded and shown (emq_notebook/decoding.py), on both backends:
foreign rows and events with bytes that are not UTF-8, escapes where text is shown, long ids
clipped where shown, and the ids a bulk call sends."""

from typing import Any

import fakeredis
import pandas as pd
import pytest
import redis
from dead_letters import written_dead
from foreign_bytes import BAD, BAD_TEXT, PAYLOAD, row_key
from foreign_bytes import Q as Q_wire
from foreign_ids import Q, foreign_ids, written
from helpers import consistency_problems, notebook_html, server_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mailq import Q as Q_fenced_round2
from mailq import with_a_foreign_error

import emq_notebook as emq
from emq_notebook import admin, decoding, events, frames, jobs, lanes, scripts
from emq_notebook.connector import fake_server
from emq_notebook.defaults import BYTE_BUDGET

# -- Do no harm, ids another node wrote long: a move can count a member's id only after it has read
# it, so what a call reads of a set must follow what its byte budget may still spend, not its budget
# of members. Both backends, each call under the harness's watchdog (tests/harm.py); what a call
# reads is counted from the set reads its script sends (MONITOR on Valkey, a spy on the embedded
# server), never timed.


def test_a_frame_shows_an_id_another_node_made_long_clipped(conn, ip, capsys):
    """A snapshot keeps each id as read (a 70 KB one too: written back, it is the same
    member), but the `emq` shell, a notebook's HTML and a grid show it as its first 200
    characters and its length, as a move reports it: no 70 KB line, no 70 KB cell, no
    70 KB row header in a grid."""
    from emq_notebook import cli
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


# -- A bulk verb sends a call about the ids its script will examine (`decoding.batch`, counting each
# id `defaults.ID_WORK` times its bytes on the wire, as the scripts do).


def test_a_call_is_sent_about_the_bytes_its_script_examines(conn):
    """40 dead ids of 20 KB: the script counts each at ID_WORK times its bytes, so a
    call examines about three; a call is sent about that many, not 52 (1 MB of them,
    each sent again until examined: 13 times the bytes)."""
    ids = [f"{k:03d}" + "x" * 20_000 for k in range(40)]
    written_dead(conn, "long", ids)
    sent: list[int] = []
    real = conn.run

    def counted(name, keys, args=(), **kw):
        sent.append(sum(len(str(a)) for a in args[2:]))
        return real(name, keys, args, **kw)

    conn.run = counted
    words = admin.reprocess_jobs(conn, "long", ids)
    assert set(words.values()) == {"reprocessed"}
    whole = sum(map(len, ids))
    assert sum(sent) <= 2 * whole, (len(sent), sum(sent), whole)


def test_a_batch_counts_bytes_on_the_wire_and_its_weight():
    euro = "\u20ac" * 100  # 300 bytes
    assert decoding.batch([euro] * 10, 0, 10, 900) == [euro] * 3
    assert decoding.batch([euro] * 10, 2, 10, 900, weight=3) == [euro]  # one at least
    assert decoding.batch(["ab"] * 10, 4, 3, BYTE_BUDGET) == ["ab"] * 3
    # a byte read from the server that is not UTF-8 is one byte on the wire
    assert decoding.batch(["\udcff" * 300] * 4, 0, 4, 900) == ["\udcff" * 300] * 3


# -- The connections' policies, on both backends: foreign rows with non-UTF-8 bytes read, claim and
# write back without an error (decoding.ERRORS on every client); a URL and `embedded` together are a
# usage error; the function library comes back after FUNCTION FLUSH; a stopped embedded Valkey stops
# quietly at exit.


def raw_client(backend: str, request: Any) -> Any:
    """Another client (not the toolkit's), answering bytes, as another node would write."""
    if backend == "fake":
        return fakeredis.FakeRedis(server=fake_server())
    return redis.Redis(host="127.0.0.1", port=server_for(backend, request).port)


def foreign_rows(conn: emq.Connection, raw: Any) -> None:
    """j_bad pending with a non-UTF-8 payload and log line; j_dead dead with such an error."""
    jobs.enqueue(conn, Q_wire, "{}", id="j_dead", max_attempts=1)
    jobs.claim(conn, Q_wire, 60_000)
    jobs.fail(conn, Q_wire, "j_dead", "boom")
    raw.hset(row_key("j_dead"), "last_error", b"boom " + BAD)
    jobs.enqueue(conn, Q_wire, "{}", id="j_bad")
    jobs.add_log(conn, Q_wire, "j_bad", "first")
    raw.hset(row_key("j_bad"), "payload", PAYLOAD)
    raw.rpush(row_key("j_bad") + ":logs", b"line " + BAD)


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_foreign_row_with_non_utf8_bytes_is_claimed_once_and_read(
    conn: Any, connect_as: Any, backend: Any, request: Any, executor: Any
) -> None:
    raw = raw_client(backend, request)
    foreign_rows(conn, raw)
    c = connect_as(executor)
    claimed = jobs.claim(c, Q_wire, 60_000)
    assert claimed is not None and claimed[:2] == ("j_bad", f'{{"to": "{BAD_TEXT}"}}')
    assert conn.client.zrange(f"emq:{{{Q_wire}}}:active", 0, -1) == ["j_bad"]
    assert consistency_problems(conn, Q_wire) == []
    row = jobs.get_job(c, Q_wire, "j_bad")
    assert row["payload"] == claimed[1] and row["state"] == "active"
    assert jobs.get_job(c, Q_wire, "j_dead")["last_error"] == "boom " + BAD_TEXT
    assert jobs.get_job_logs(c, Q_wire, "j_bad") == ["first", "line " + BAD_TEXT]
    assert frames.rows(c, Q_wire, ["j_bad", "j_dead"], ("payload", "last_error")) == [
        [claimed[1], None],
        ["{}", "boom " + BAD_TEXT],
    ]
    assert decoding.printable(claimed[1]) == '{"to": "\\xff\\xfe"}'
    assert frames.counts(c, [Q_wire]).loc[Q_wire, "active"] == 1
    # the text read writes the same bytes back
    jobs.update_data(c, Q_wire, "j_bad", row["payload"])
    assert raw.hget(row_key("j_bad"), "payload") == PAYLOAD
    jobs.add_log(c, Q_wire, "j_bad", "again " + BAD_TEXT)
    assert raw.lrange(row_key("j_bad") + ":logs", -1, -1) == [b"again " + BAD]
    jobs.fail(c, Q_wire, "j_bad", "boom")
    jobs.reprocess_job(c, Q_wire, "j_dead")
    assert consistency_problems(conn, Q_wire) == []


def events_of(conn: emq.Connection, act: Any) -> list[dict]:
    """The events `act()` publishes, read until a closing marker this test sends."""
    stream = events.follow(conn, Q_wire, seconds=10)
    act()
    conn.client.publish(f"emq:{{{Q_wire}}}:events", '{"event": "last"}')
    seen = []
    for event in stream:
        if event.get("event") == "last":
            break
        seen.append(event)
    stream.close()  # type: ignore[attr-defined]
    return seen


@pytest.mark.parametrize("executor", ["script", "function"])
def test_an_error_text_with_bad_bytes_is_stored_and_announced(
    conn: Any, connect_as: Any, backend: Any, request: Any, executor: Any
) -> None:
    """A handler's error quoting a foreign payload: the row keeps the bytes as given
    (both backends), and the event carries them as \\xNN text, valid UTF-8 JSON
    for every reader (fakeredis' strict cjson once raised after the writes)."""
    raw = raw_client(backend, request)
    c = connect_as(executor)
    jobs.enqueue(c, Q_wire, "{}", id="j_1", max_attempts=2)
    jobs.enqueue(c, Q_wire, "{}", id="j_2")
    for expected in ("retry", "dead"):
        jobs.claim(c, Q_wire, 60_000)
        seen = events_of(conn, lambda: jobs.fail(c, Q_wire, "j_1", "it said " + BAD_TEXT + " \u00e9"))
        assert raw.hget(row_key("j_1"), "last_error") == b"it said " + BAD + " \u00e9".encode()
        assert [(e["event"], e["error"]) for e in seen] == [(expected, "it said \\xff\\xfe \u00e9")]
        if expected == "retry":  # due now, back to pending for the second attempt
            conn.client.zadd(f"emq:{{{Q_wire}}}:schedule", {"j_1": 0}, xx=True)
            assert jobs.promote(c, Q_wire) == 1
    assert consistency_problems(conn, Q_wire) == []
    seen = events_of(conn, lambda: jobs.update_progress(c, Q_wire, "j_2", "50% " + BAD_TEXT))
    assert raw.hget(row_key("j_2"), "progress") == b"50% " + BAD
    assert [(e["event"], e["progress"]) for e in seen] == [("progress", "50% \\xff\\xfe")]


TRICKY = [
    b"\xed\xa0\x80",
    b"\xf0\x9f\x98A",
    b"\xe2\x82",
    b"\xc0\xaf",
    b"\xf4\x90\x80\x80",
    "\U0001f600 \u00e9 \uffff".encode(),
    b"\x80",
    b"\xdf\xbf\xdf",
    b"a\xffb",
    b"",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.one_of(
        st.sampled_from(TRICKY),
        st.binary(max_size=16),
        st.lists(st.one_of(st.binary(max_size=3), st.text(max_size=3).map(str.encode))).map(b"".join),
    )
)
def test_event_text_is_what_printable_shows(conn: Any, data: bytes) -> None:
    """The events' UTF-8 repair (lua/includes/common.lua `utf8_text`) writes exactly
    what `decoding.printable` shows for the same bytes."""
    body = (scripts.lua_dir() / "includes" / "common.lua").read_text() + "\nreturn utf8_text(ARGV[1])"
    out = conn.client.eval(body, 0, data)
    assert out == decoding.printable(data.decode("utf-8", decoding.ERRORS))


# pandas 3 stores text in pyarrow strings, which refuse the surrogates the policy
# decodes bad bytes to: frames.snapshot builds such a column as object dtype
def test_a_snapshot_holds_a_foreign_row(conn: Any, backend: Any, request: Any) -> None:
    foreign_rows(conn, raw_client(backend, request))
    frame = frames.snapshot(conn, Q_wire)
    assert frame.loc["j_bad", "payload"] == f'{{"to": "{BAD_TEXT}"}}'
    assert frame.loc["j_dead", "last_error"] == "boom " + BAD_TEXT
    assert decoding.printable(frame.loc["j_bad", "payload"]) == '{"to": "\\xff\\xfe"}'
    # only the columns holding such text are object; the others stay Arrow-backed
    assert frame["payload"].dtype == object and frame["last_error"].dtype == object
    assert frame["state"].dtype != object and frame.index.dtype != object


def test_a_snapshot_holds_foreign_numbers_and_text_in_every_field(
    conn: Any, backend: Any, request: Any
) -> None:
    """Every field the frame shows, written by another node as bytes that are not
    UTF-8 (or as a number that is not a whole number): the frame is built, the bad
    counter reads <NA>, the others keep their int64 column, text is kept as read."""
    raw = raw_client(backend, request)
    for field in frames.FIELDS:
        jobs.enqueue(conn, Q_wire, "{}", id=f"j_{field}")
        raw.hset(row_key(f"j_{field}"), field, BAD)
    jobs.enqueue(conn, Q_wire, "{}", id="j_half")
    raw.hset(row_key("j_half"), "attempts", b"2.5")
    frame = frames.snapshot(conn, Q_wire)
    assert len(frame) == len(frames.FIELDS) + 1
    for field in ("group", "last_error", "progress", "payload"):
        assert frame.loc[f"j_{field}", field] == BAD_TEXT
    for field in ("priority", "attempts", "failures", "stalled"):
        assert pd.isna(frame.loc[f"j_{field}", field])
        assert frame.loc["j_payload", field] == 0
    assert pd.isna(frame.loc["j_half", "attempts"])
    # a clean queue keeps plain int64 counters
    jobs.enqueue(conn, "clean", "{}", id="j_1")
    assert str(frames.snapshot(conn, "clean")["attempts"].dtype) == "int64"


def test_a_foreign_queue_name_is_left_out_of_the_list(conn: Any, backend: Any, request: Any) -> None:
    raw = raw_client(backend, request)
    jobs.enqueue(conn, Q_wire, "{}", id="j_1")
    raw.hset(b"emq:{b" + BAD + b"d}:meta", "paused", 1)
    raw.hset(b"emq:{a b}:meta", "paused", 1)
    assert frames.queues(conn) == [Q_wire]
    assert frames.counts(conn).index.tolist() == [Q_wire]


def test_a_foreign_row_in_a_later_batch_turns_only_its_column_to_objects(
    conn: Any, backend: Any, request: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(frames, "BATCH", 2)  # the columns are built a batch at a time
    good = [jobs.enqueue(conn, Q_wire, f'{{"n": {i}}}', id=f"j_{i}") for i in range(5)]
    raw_client(backend, request).hset(row_key("j_4"), "payload", PAYLOAD)
    frame = frames.snapshot(conn, Q_wire)
    assert list(frame.index) == good and frame["payload"].dtype == object
    assert frame["payload"].tolist() == [f'{{"n": {i}}}' for i in range(4)] + [f'{{"to": "{BAD_TEXT}"}}']
    assert frame["state"].dtype != object


def test_object_strings_when_asked(conn: Any, monkeypatch: Any) -> None:
    jobs.enqueue(conn, Q_wire, "{}", id="j_a", group="acme")
    jobs.enqueue(conn, Q_wire, "{}", id="j_b")
    arrow = frames.snapshot(conn, Q_wire)
    monkeypatch.setattr(frames, "TEXT", object)
    plain = frames.snapshot(conn, Q_wire)
    assert all(plain[c].dtype == object for c in ("state", "group", "last_error", "progress", "payload"))
    assert arrow["payload"].dtype != object
    assert plain.astype(object).where(plain.notna(), None).to_dict("index") == arrow.astype(object).where(
        arrow.notna(), None
    ).to_dict("index")


def test_a_foreign_row_in_a_lane_is_claimed_once(conn: Any, backend: Any, request: Any) -> None:
    raw = raw_client(backend, request)
    jobs.enqueue(conn, Q_wire, "{}", id="j_lane", group="acme")
    raw.hset(row_key("j_lane"), "payload", PAYLOAD)
    claimed = lanes.claim(conn, Q_wire, 60_000)
    assert claimed is not None and claimed[1] == f'{{"to": "{BAD_TEXT}"}}'
    assert conn.client.zrange(f"emq:{{{Q_wire}}}:active", 0, -1) == ["j_lane"]
    assert consistency_problems(conn, Q_wire) == []


def test_an_event_with_non_utf8_bytes_is_read(conn: Any, backend: Any, request: Any) -> None:
    raw = raw_client(backend, request)
    stream = events.follow(conn, Q_wire, seconds=10)
    raw.publish(f"emq:{{{Q_wire}}}:events", b'{"event": "added", "job": "' + BAD + b'"}')
    raw.publish(f"emq:{{{Q_wire}}}:events", b"not json " + BAD)
    raw.publish(f"emq:{{{Q_wire}}}:events", b'{"event": "last"}')
    seen = []
    for event in stream:
        seen.append(event)
        if event.get("event") == "last":
            break
    stream.close()  # type: ignore[attr-defined]
    assert seen[0] == {"event": "added", "job": BAD_TEXT}
    assert seen[1] == {"event": "unparsed", "raw": "not json " + BAD_TEXT}
    assert decoding.printable(seen[1]["raw"]) == "not json \\xff\\xfe"


def test_the_decoding_options_are_fixed() -> None:
    for option in ({"decode_responses": False}, {"encoding_errors": "strict"}, {"encoding": "latin-1"}):
        with pytest.raises(emq.BadInput, match="decoding policy"):
            emq.connect("redis://127.0.0.1:1/0", **option)


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


def test_a_frame_with_undecodable_text_shows_escapes_in_ipython(ip, conn):
    from emq_notebook import triage

    with_a_foreign_error(conn)
    found = triage.find(conn, Q_fenced_round2)
    for value in (
        found[["last_error"]],
        triage.errors(conn, Q_fenced_round2)[["count"]],
        found["last_error"],
    ):
        shown = ip.display_formatter.formatters["text/plain"](value)
        assert "\\xff\\xfe" in shown and "\udcff" not in shown
    html = notebook_html(ip, found)
    assert "\\xff\\xfe" in html and "\udcff" not in html
