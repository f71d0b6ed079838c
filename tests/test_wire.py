"""The connections' policies, on both backends: foreign rows with non-UTF-8 bytes
read, claim and write back without an error (decoding.ERRORS on every client); a
URL and `embedded` together are a usage error; the function library comes back
after FUNCTION FLUSH; a stopped embedded Valkey stops quietly at exit."""

from __future__ import annotations

from typing import Any

import fakeredis
import pandas as pd
import pytest
import redis
from helpers import consistency_problems, dump, server_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from own_process import python_without_url

import emq_notebook as emq
from emq_notebook import admin, decoding, events, frames, jobs, lanes, scripts
from emq_notebook.connector import fake_server
from emq_notebook.errors import UsageProblem

Q = "mail"
BAD = b"\xff\xfe"
# what `decoding.ERRORS` reads BAD as
BAD_TEXT = BAD.decode("utf-8", decoding.ERRORS)
PAYLOAD = b'{"to": "' + BAD + b'"}'


def raw_client(backend: str, request: Any) -> Any:
    """Another client (not the toolkit's), answering bytes, as another node would write."""
    if backend == "fake":
        return fakeredis.FakeRedis(server=fake_server())
    return redis.Redis(host="127.0.0.1", port=server_for(backend, request).port)


def job_key(job_id: str) -> str:
    return f"emq:{{{Q}}}:job:{job_id}"


def foreign_rows(conn: emq.Connection, raw: Any) -> None:
    """j_bad pending with a non-UTF-8 payload and log line; j_dead dead with such an error."""
    jobs.enqueue(conn, Q, "{}", id="j_dead", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_dead", "boom")
    raw.hset(job_key("j_dead"), "last_error", b"boom " + BAD)
    jobs.enqueue(conn, Q, "{}", id="j_bad")
    jobs.add_log(conn, Q, "j_bad", "first")
    raw.hset(job_key("j_bad"), "payload", PAYLOAD)
    raw.rpush(job_key("j_bad") + ":logs", b"line " + BAD)


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_foreign_row_with_non_utf8_bytes_is_claimed_once_and_read(
    conn: Any, connect_as: Any, backend: Any, request: Any, executor: Any
) -> None:
    raw = raw_client(backend, request)
    foreign_rows(conn, raw)
    c = connect_as(executor)
    claimed = jobs.claim(c, Q, 60_000)
    assert claimed is not None and claimed[:2] == ("j_bad", f'{{"to": "{BAD_TEXT}"}}')
    assert conn.client.zrange(f"emq:{{{Q}}}:active", 0, -1) == ["j_bad"]
    assert consistency_problems(conn, Q) == []
    row = jobs.get_job(c, Q, "j_bad")
    assert row["payload"] == claimed[1] and row["state"] == "active"
    assert jobs.get_job(c, Q, "j_dead")["last_error"] == "boom " + BAD_TEXT
    assert jobs.get_job_logs(c, Q, "j_bad") == ["first", "line " + BAD_TEXT]
    assert frames.rows(c, Q, ["j_bad", "j_dead"], ("payload", "last_error")) == [
        [claimed[1], None],
        ["{}", "boom " + BAD_TEXT],
    ]
    assert decoding.printable(claimed[1]) == '{"to": "\\xff\\xfe"}'
    assert frames.counts(c, [Q]).loc[Q, "active"] == 1
    # the text read writes the same bytes back
    jobs.update_data(c, Q, "j_bad", row["payload"])
    assert raw.hget(job_key("j_bad"), "payload") == PAYLOAD
    jobs.add_log(c, Q, "j_bad", "again " + BAD_TEXT)
    assert raw.lrange(job_key("j_bad") + ":logs", -1, -1) == [b"again " + BAD]
    jobs.fail(c, Q, "j_bad", "boom")
    jobs.reprocess_job(c, Q, "j_dead")
    assert consistency_problems(conn, Q) == []


def events_of(conn: emq.Connection, act: Any) -> list[dict]:
    """The events `act()` publishes, read until a closing marker this test sends."""
    stream = events.follow(conn, Q, seconds=10)
    act()
    conn.client.publish(f"emq:{{{Q}}}:events", '{"event": "last"}')
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
    jobs.enqueue(c, Q, "{}", id="j_1", max_attempts=2)
    jobs.enqueue(c, Q, "{}", id="j_2")
    for expected in ("retry", "dead"):
        jobs.claim(c, Q, 60_000)
        seen = events_of(conn, lambda: jobs.fail(c, Q, "j_1", "it said " + BAD_TEXT + " \u00e9"))
        assert raw.hget(job_key("j_1"), "last_error") == b"it said " + BAD + " \u00e9".encode()
        assert [(e["event"], e["error"]) for e in seen] == [(expected, "it said \\xff\\xfe \u00e9")]
        if expected == "retry":  # due now, back to pending for the second attempt
            conn.client.zadd(f"emq:{{{Q}}}:schedule", {"j_1": 0}, xx=True)
            assert jobs.promote(c, Q) == 1
    assert consistency_problems(conn, Q) == []
    seen = events_of(conn, lambda: jobs.update_progress(c, Q, "j_2", "50% " + BAD_TEXT))
    assert raw.hget(job_key("j_2"), "progress") == b"50% " + BAD
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
    frame = frames.snapshot(conn, Q)
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
        jobs.enqueue(conn, Q, "{}", id=f"j_{field}")
        raw.hset(job_key(f"j_{field}"), field, BAD)
    jobs.enqueue(conn, Q, "{}", id="j_half")
    raw.hset(job_key("j_half"), "attempts", b"2.5")
    frame = frames.snapshot(conn, Q)
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
    jobs.enqueue(conn, Q, "{}", id="j_1")
    raw.hset(b"emq:{b" + BAD + b"d}:meta", "paused", 1)
    raw.hset(b"emq:{a b}:meta", "paused", 1)
    assert frames.queues(conn) == [Q]
    assert frames.counts(conn).index.tolist() == [Q]


def test_a_foreign_row_in_a_later_batch_turns_only_its_column_to_objects(
    conn: Any, backend: Any, request: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(frames, "BATCH", 2)  # the columns are built a batch at a time
    good = [jobs.enqueue(conn, Q, f'{{"n": {i}}}', id=f"j_{i}") for i in range(5)]
    raw_client(backend, request).hset(job_key("j_4"), "payload", PAYLOAD)
    frame = frames.snapshot(conn, Q)
    assert list(frame.index) == good and frame["payload"].dtype == object
    assert frame["payload"].tolist() == [f'{{"n": {i}}}' for i in range(4)] + [f'{{"to": "{BAD_TEXT}"}}']
    assert frame["state"].dtype != object


def test_object_strings_when_asked(conn: Any, monkeypatch: Any) -> None:
    jobs.enqueue(conn, Q, "{}", id="j_a", group="acme")
    jobs.enqueue(conn, Q, "{}", id="j_b")
    arrow = frames.snapshot(conn, Q)
    monkeypatch.setattr(frames, "TEXT", object)
    plain = frames.snapshot(conn, Q)
    assert all(plain[c].dtype == object for c in ("state", "group", "last_error", "progress", "payload"))
    assert arrow["payload"].dtype != object
    assert plain.astype(object).where(plain.notna(), None).to_dict("index") == arrow.astype(object).where(
        arrow.notna(), None
    ).to_dict("index")


def test_a_foreign_row_in_a_lane_is_claimed_once(conn: Any, backend: Any, request: Any) -> None:
    raw = raw_client(backend, request)
    jobs.enqueue(conn, Q, "{}", id="j_lane", group="acme")
    raw.hset(job_key("j_lane"), "payload", PAYLOAD)
    claimed = lanes.claim(conn, Q, 60_000)
    assert claimed is not None and claimed[1] == f'{{"to": "{BAD_TEXT}"}}'
    assert conn.client.zrange(f"emq:{{{Q}}}:active", 0, -1) == ["j_lane"]
    assert consistency_problems(conn, Q) == []


def test_an_event_with_non_utf8_bytes_is_read(conn: Any, backend: Any, request: Any) -> None:
    raw = raw_client(backend, request)
    stream = events.follow(conn, Q, seconds=10)
    raw.publish(f"emq:{{{Q}}}:events", b'{"event": "added", "job": "' + BAD + b'"}')
    raw.publish(f"emq:{{{Q}}}:events", b"not json " + BAD)
    raw.publish(f"emq:{{{Q}}}:events", b'{"event": "last"}')
    seen = []
    for event in stream:
        seen.append(event)
        if event.get("event") == "last":
            break
    stream.close()  # type: ignore[attr-defined]
    assert seen[0] == {"event": "added", "job": BAD_TEXT}
    assert seen[1] == {"event": "unparsed", "raw": "not json " + BAD_TEXT}
    assert decoding.printable(seen[1]["raw"]) == "not json \\xff\\xfe"


def test_the_cluster_client_decodes_and_writes_back_the_same_way(cluster: Any) -> None:
    from helpers import open_conn

    conn = open_conn("cluster", cluster)
    jobs.enqueue(conn, Q, "{}", id="j_bad")
    node = conn.client.get_node_from_key(job_key("j_bad"))
    raw = redis.Redis(host=node.host, port=node.port)
    raw.hset(job_key("j_bad"), "payload", PAYLOAD)
    stream = events.follow(conn, Q, seconds=10)
    claimed = jobs.claim(conn, Q, 60_000)
    assert claimed is not None and claimed[1] == f'{{"to": "{BAD_TEXT}"}}'
    assert frames.rows(conn, Q, ["j_bad"], ("payload",)) == [[claimed[1]]]
    jobs.update_data(conn, Q, "j_bad", claimed[1])
    assert raw.hget(job_key("j_bad"), "payload") == PAYLOAD
    raw.publish(f"emq:{{{Q}}}:events", b'{"event": "x", "job": "' + BAD + b'"}')
    for event in stream:
        if event.get("event") == "x":
            assert event["job"] == BAD_TEXT
            break
    stream.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("embedded", ["fake", "valkey"])
def test_a_url_and_embedded_together_are_a_usage_problem(embedded: Any, monkeypatch: Any) -> None:
    import emq_notebook.connector as connector

    monkeypatch.setattr(connector, "valkey_server", lambda: pytest.fail("a server was started"))
    with pytest.raises(UsageProblem, match="not both") as info:
        emq.connect("redis://u:pw-Kq7@127.0.0.1:1/0", embedded=embedded)
    assert "pw-Kq7" not in str(info.value)
    # the environment's URL is only a default: an explicit embedded backend wins over it
    monkeypatch.setenv("EMQ_URL", "redis://127.0.0.1:1/0")
    assert emq.connect(embedded="fake").label == "embedded fakeredis"


def test_the_decoding_options_are_fixed() -> None:
    for option in ({"decode_responses": False}, {"encoding_errors": "strict"}, {"encoding": "latin-1"}):
        with pytest.raises(emq.BadInput, match="decoding policy"):
            emq.connect("redis://127.0.0.1:1/0", **option)


def test_the_function_library_comes_back_after_function_flush(conn: Any, connect_as: Any) -> None:
    fn = connect_as("function")
    jobs.enqueue(fn, Q, "{}", id="j_1")
    jobs.add_log(fn, Q, "j_1", "one")
    conn.client.function_flush()  # as a restart or another operator would
    jobs.enqueue(fn, Q, "{}", id="j_2")  # a writing verb (FCALL)
    conn.client.function_flush()
    assert jobs.get_job_logs(fn, Q, "j_1") == ["one"]  # a reading one (FCALL_RO)
    conn.client.function_flush()
    assert (jobs.claim(fn, Q, 60_000) or ("",))[0] == "j_1"  # the claim: exactly one job served
    assert conn.client.zrange(f"emq:{{{Q}}}:active", 0, -1) == ["j_1"]
    conn.client.function_flush()
    before = dump(conn)
    with pytest.raises(emq.NotDead):
        jobs.reprocess_job(fn, Q, "j_2")  # a refusal after the reload is typed
    assert dump(conn) == before
    conn.client.function_flush()
    admin.pause(fn, Q)
    assert admin.is_paused(conn, Q)


def test_a_stopped_embedded_valkey_stops_quietly_at_exit() -> None:
    code = (
        "import emq_notebook as e; from emq_notebook import connector; "
        "c = e.connect(embedded='valkey'); c.command('PING'); connector.valkey_server().stop(); "
        "print('stopped')"
    )
    out = python_without_url(code)
    assert out.returncode == 0 and out.stdout.strip() == "stopped"
    assert out.stderr == ""


def test_the_function_library_comes_back_on_a_cluster_primary(cluster: Any) -> None:
    from helpers import open_conn

    fn = open_conn("cluster", cluster, executor="function")
    queues = [f"q{i}" for i in range(9)]
    for q in queues:
        jobs.enqueue(fn, q, "{}", id="j_1")
    for node in fn.client.get_primaries():  # every primary forgets it, on a live connection
        redis.Redis(host=node.host, port=node.port).execute_command("FUNCTION", "FLUSH")
    for q in queues:
        assert (jobs.claim(fn, q, 60_000) or ("",))[0] == "j_1"
        assert jobs.get_job_logs(fn, q, "j_1") == []
