"""jobs.enqueue_many against N single enqueues, on both backends and both executors:
the same rows and sets (footprints compared), dedup, delay, group, bounded calls,
and bad input that writes nothing at all."""

from __future__ import annotations

import json
import time

import pytest
from helpers import dump

from emq_notebook import footprint, jobs
from emq_notebook.connector import Connection
from emq_notebook.defaults import BYTE_BUDGET, MAX_MOVE_BUDGET
from emq_notebook.errors import BadInput, EMQError, InvalidName, ReadOnly
from emq_notebook.keyspace import base

Q = "mail"


@pytest.fixture(params=("script", "function"))
def many(request, conn, connect_as):
    """A connection to the (flushed) backend with the executor under test."""
    return conn if request.param == "script" else connect_as("function")


def normalised(conn) -> dict:
    """The queue's footprint with the clock taken out: `created_at` masked and each
    scheduled job's due time (its score and its row's `due_at`) as its delay from its
    own `created_at`."""
    fp = footprint.footprint(conn, Q)
    created = {
        k[len(base(Q)) + 4 :]: int(v["created_at"])
        for k, (kind, v) in fp.items()
        if kind == "hash" and k.startswith(base(Q) + "job:")
    }
    out = {}
    for key, (kind, value) in fp.items():
        if kind == "hash":
            at = {
                "created_at": lambda v: "<t>",
                "due_at": lambda v, row=value: int(v) - int(row["created_at"]),
            }
            value = {f: at[f](v) if f in at else v for f, v in value.items()}
        elif key == base(Q) + "schedule":
            value = [(m, score - created[m]) for m, score in value]
        out[key] = (kind, value)
    return out


# each batch: (payloads, options) as given to enqueue_many, in order
BATCHES = [
    (['{"n": 1}', '{"n": 2}', '{"n": 3}'], {}),
    (['{"d": 1}', '{"d": 2}', '{"d": 3}', '{"d": 4}'], {"dedup": ["k1", "k1", None, "k2"]}),
    (['{"g": 1}', '{"g": 2}'], {"group": "acme"}),
    (['{"g": 3}'], {"group": "acme", "delay": 60_000}),
    (['{"s": 1}', '{"s": 2}'], {"delay": 3_600_000, "dedup": ["k2", "k3"]}),
    (['{"p": 1}'], {"priority": 5, "max_attempts": 1, "backoff_ms": 250}),
]


def singles(conn, ids_by_batch):
    """The same jobs through `enqueue`, one call each, with the ids enqueue_many chose."""
    answers = []
    for (payloads, opts), ids in zip(BATCHES, ids_by_batch, strict=True):
        keys = opts.get("dedup") or [None] * len(payloads)
        for payload, key, jid in zip(payloads, keys, ids, strict=True):
            answers.append(
                jobs.enqueue(
                    conn,
                    Q,
                    payload,
                    id=jid,
                    group=opts.get("group"),
                    delay_ms=opts.get("delay", 0),
                    priority=opts.get("priority", 0),
                    max_attempts=opts.get("max_attempts", 3),
                    dedup=key,
                    backoff_ms=opts.get("backoff_ms", 1000),
                )
            )
    return answers


@pytest.mark.parametrize("chunk", (1, 2, MAX_MOVE_BUDGET))
def test_the_same_rows_and_sets_as_single_enqueues(conn, many, chunk):
    ids_by_batch = [jobs.enqueue_many(many, Q, payloads, chunk=chunk, **opts) for payloads, opts in BATCHES]
    bulk = normalised(conn)
    conn.client.flushall()
    one_by_one = singles(conn, ids_by_batch)
    assert one_by_one == [i for ids in ids_by_batch for i in ids]
    assert normalised(conn) == bulk
    # what was written, read back: 3 flat + 3 new (k1 once, k2) + 2 lane + 1 due + 1 new (k3) + 1
    assert conn.client.zcard(base(Q) + "pending") == 7
    assert conn.client.zcard(base(Q) + "g:acme:pending") == 2
    assert conn.client.zcard(base(Q) + "schedule") == 2
    assert conn.client.lrange(base(Q) + "ring", 0, -1) == ["acme"]


def test_dedup_answers_the_holder_and_writes_nothing_for_it(conn, many):
    held = jobs.enqueue(conn, Q, "{}", dedup="welcome:1")
    before = dump(conn)
    ids = jobs.enqueue_many(many, Q, ["{}", "{}", "{}"], dedup=["welcome:1", "welcome:2", "welcome:2"])
    assert ids[0] == held and ids[1] == ids[2] != held
    assert conn.client.hgetall(base(Q) + "dedup") == {"welcome:1": held, "welcome:2": ids[1]}
    assert conn.client.hget(base(Q) + "job:" + ids[1], "dedup") == "welcome:2"
    assert conn.client.zrange(base(Q) + "pending", 0, -1) == [held, ids[1]]
    assert set(dump(conn)) - set(before) == {base(Q) + "job:" + ids[1]}


def test_delay_schedules_and_group_fills_one_lane(conn, many):
    t = time.time() * 1000
    due = jobs.enqueue_many(many, Q, ["{}"] * 3, delay=90_000)
    lane = jobs.enqueue_many(many, Q, ["{}"] * 4, group="acme", chunk=3)
    scores = dict(conn.client.zrange(base(Q) + "schedule", 0, -1, withscores=True))
    assert sorted(scores) == sorted(due)
    assert all(t + 90_000 - 5_000 <= s <= t + 90_000 + 60_000 for s in scores.values())
    assert all(conn.client.hget(base(Q) + "job:" + i, "state") == "schedule" for i in due)
    assert conn.client.zrange(base(Q) + "g:acme:pending", 0, -1) == lane  # id order is enqueue order
    assert conn.client.smembers(base(Q) + "groups") == {"acme"}
    assert conn.client.lrange(base(Q) + "wake", 0, -1) == ["acme"]
    assert not conn.client.exists(base(Q) + "pending")


def test_one_added_event_per_created_job(conn, many):
    ps = conn.client.pubsub()
    ps.subscribe(base(Q) + "events")
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    ids = jobs.enqueue_many(many, Q, ["{}"] * 4, group="acme", dedup=["a", "a", None, None])
    seen = []
    deadline = time.time() + 1.0
    while time.time() < deadline:
        m = ps.get_message(timeout=0.1)
        if m and m["type"] == "message":
            seen.append(json.loads(m["data"]))
    ps.close()
    assert seen == [{"event": "added", "job": i, "group": "acme"} for i in (ids[0], ids[2], ids[3])]


def test_the_added_event_is_json_for_ids_and_groups_another_node_writes(conn, many):
    """The script is a wire contract: another node may send ids and a group our name
    gate refuses; each event still reads back as the values sent."""
    ps = conn.client.pubsub()
    ps.subscribe(base(Q) + "events")
    deadline = time.time() + 2
    while ps.get_message(timeout=0.1) is None and time.time() < deadline:
        pass
    odd = ["plain_1", 'say "hi"', "back\\slash", "caf\u00e9", "tab\there", "a/b"]
    groups = ("", "tenant 42", 'ten"ant', "t\u00e9")
    for k, group in enumerate(groups):
        argv: list[object] = [group, 0, 0, 3, 1000]
        for job_id in odd:
            argv += [f"g{k}-{job_id}", "{}", ""]
        many.run("enqueue_many", [base(Q)], argv)
    seen = []
    deadline = time.time() + 2.0
    while time.time() < deadline and len(seen) < 4 * len(odd):
        m = ps.get_message(timeout=0.1)
        if m and m["type"] == "message":
            seen.append(json.loads(m["data"]))
    ps.close()
    assert seen == [
        {"event": "added", "job": f"g{k}-{job_id}"} | ({"group": group} if group else {})
        for k, group in enumerate(groups)
        for job_id in odd
    ]


def test_calls_are_bounded_by_the_chunk(conn, many):
    sent = []
    real = many.run

    def counted(name, keys, args=(), **kw):
        sent.append((name, len(args)))
        return real(name, keys, args, **kw)

    many.run = counted
    ids = jobs.enqueue_many(many, Q, [str(i) for i in range(7)], chunk=3)
    assert sent == [("enqueue_many", 5 + 9), ("enqueue_many", 5 + 9), ("enqueue_many", 5 + 3)]
    assert len(set(ids)) == 7 and conn.client.zrange(base(Q) + "pending", 0, -1) == ids
    assert jobs.enqueue_many(many, Q, []) == [] and len(sent) == 3  # nothing to send
    sent.clear()
    jobs.enqueue_many(many, Q, ["{}"] * (jobs.CHUNK + 1))  # the default chunk
    assert [n for _, n in sent] == [5 + 3 * jobs.CHUNK, 5 + 3]


def test_calls_are_bounded_by_bytes_not_characters(conn, many):
    """Two payloads of 350,000 euro signs are 700,000 characters together but 2.1 MB on
    the wire: over `BYTE_BUDGET`, so they go in two calls."""
    sent = []
    real = many.run

    def counted(name, keys, args=(), **kw):
        sent.append(len(args))
        return real(name, keys, args, **kw)

    many.run = counted
    text = json.dumps({"note": "\u20ac" * 350_000}, ensure_ascii=False)
    assert len(text) < BYTE_BUDGET // 2 < len(text.encode())
    ids = jobs.enqueue_many(many, Q, [text, text])
    assert sent == [5 + 3, 5 + 3] and len(ids) == 2


BAD = [
    ("a payload that is not a string", dict(payloads=["{}", {"to": 1}, "{}"]), BadInput),
    ("payloads as one string", dict(payloads="{}"), BadInput),
    ("dedup as one string", dict(payloads=["{}", "{}"], dedup="k"), BadInput),
    ("dedup shorter than the payloads", dict(payloads=["{}", "{}"], dedup=["k"]), BadInput),
    ("a dedup key with a newline", dict(payloads=["{}", "{}"], dedup=[None, "a\nb"]), InvalidName),
    ("a group that escapes its key", dict(payloads=["{}"], group="a:b"), InvalidName),
    ("a negative delay", dict(payloads=["{}"], delay=-1), BadInput),
    ("a delay over a year", dict(payloads=["{}"], delay=400 * 86_400_000), BadInput),
    ("a fractional priority", dict(payloads=["{}"], priority=1.5), BadInput),
    ("zero attempts", dict(payloads=["{}"], max_attempts=0), BadInput),
    ("a zero chunk", dict(payloads=["{}"], chunk=0), BadInput),
    ("a chunk over the maximum budget", dict(payloads=["{}"], chunk=MAX_MOVE_BUDGET + 1), BadInput),
    ("a bad queue name", dict(q="a b", payloads=["{}"]), InvalidName),
]


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_bad_input_writes_nothing(conn, many, case):
    _, given, error = case
    jobs.enqueue(conn, Q, "{}", id="j_before")
    before = dump(conn)
    given = {"q": Q, **given}
    # the bad entry is last in its list, after good ones and across chunks: nothing is sent
    with pytest.raises(error):
        jobs.enqueue_many(many, given.pop("q"), given.pop("payloads"), **{"chunk": 1, **given})
    assert dump(conn) == before


def test_a_read_only_session_refuses_before_any_write(conn):
    ro = Connection(conn.client, conn.label, read_only=True)
    before = dump(conn)
    with pytest.raises(ReadOnly):
        jobs.enqueue_many(ro, Q, ["{}"])
    assert dump(conn) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["", "soon", "0", "3", "1000", "j_a", "{}", ""],  # a delay that is not whole
        ["", "0", "0", "three", "1000", "j_a", "{}", ""],  # attempts that are not whole
        ["", "0", "0", "3", "1000", "j_a", "{}", "", "j_b", "{}"],  # a job without its dedup slot
    ],
    ids=["delay", "attempts", "broken triple"],
)
def test_the_script_checks_its_whole_chunk_before_the_first_write(conn, many, argv):
    before = dump(conn)
    with pytest.raises(EMQError):
        many.run("enqueue_many", [base(Q)], argv, verb="enqueue_many", queue=Q)
    assert dump(conn) == before
