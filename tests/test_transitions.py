"""The transition table (emq_notebook/transitions.py): every Lua script has its row,
each executor runs the body its row names, every reply kind is decoded in one place,
a pipeline takes transitions, and a reader follows `%emq VERB` to its script by
names, in three files."""

from __future__ import annotations

import inspect
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import consistency_problems, dump, kept_conn, keys_of

import emq_notebook as emq
from emq_notebook import Worker, admin, catalogue, jobs, lanes, registry, repeat, scripts, transitions
from emq_notebook.checks import MAX_WHOLE
from emq_notebook.errors import (
    BadInput,
    BadRow,
    EMQError,
    Gone,
    NativeUnavailable,
    NotActive,
    NotDead,
    NotOwner,
    ReadOnly,
)
from emq_notebook.keyspace import audit_key, base, queue_key
from emq_notebook.transitions import Call, Claimed, Reply

ROOT = Path(__file__).resolve().parent.parent
Q = "mail"


def test_every_lua_script_has_a_row_in_the_table():
    """A script with no row still runs (the default: its own body under every executor,
    its reply as sent); this list is what the table does not say yet."""
    covered = set(transitions.TABLE) | {t.twin for t in transitions.TABLE.values() if t.twin}
    missing = sorted(set(scripts.names()) - covered)
    assert missing == [], f"Lua scripts with no row in emq_notebook/transitions.py: {missing}"


def test_every_row_names_scripts_that_exist():
    names = set(scripts.names())
    for t in transitions.TABLE.values():
        assert t.name in names and (t.twin is None or t.twin in names), t
        assert t.function == f"emq_{t.twin or t.name}"
        assert t.function in scripts.library()[1]


def test_a_script_with_no_row_runs_its_own_body_everywhere():
    t = transitions.get("a_new_script")
    assert t == transitions.Transition("a_new_script")
    assert [t.body(e) for e in ("script", "function", "native")] == [
        ("script", "a_new_script"),
        ("function", "a_new_script"),
        ("script", "a_new_script"),
    ]
    assert transitions.decode(t.reply, [1, "x"], Call("a_new_script")) == [1, "x"]


BODIES = {
    # transition: (script, script after a faulted pause read, function, native)
    "claim2": ("EVALSHA claim2", "EVALSHA native_claim", "FCALL emq_native_claim", "EMQ.CLAIM"),
    "gclaim2": (
        "EVALSHA gclaim2",
        "EVALSHA native_gclaim",
        "FCALL emq_native_gclaim",
        "EVALSHA native_gclaim",
    ),
    "reprocess2": (
        "EVALSHA reprocess2",
        "EVALSHA native_reprocess",
        "FCALL emq_native_reprocess",
        "EMQ.REPROCESS",
    ),
    "drain": ("EVALSHA drain", "EVALSHA drain", "FCALL emq_drain", "EVALSHA drain"),
}
KEYS = {
    "claim2": ["pending", "active", ""],
    "gclaim2": ["ring", "active", ""],
    "reprocess2": ["job:j_1", "dead", "pending", ""],
    "drain": ["", "pending"],
}
ARGS = {"claim2": [60_000, "tok"], "gclaim2": [60_000, "tok"], "reprocess2": ["j_1"], "drain": [10]}


def sent_by(conn: emq.Connection) -> list[str]:
    """The transition bodies `conn` sends, as `EVALSHA <script>`, `FCALL <function>` or
    the native command."""
    shas = {scripts_sha(n): n for n in scripts.names()}
    sent: list[str] = []
    real = conn.client.execute_command

    def record(*args: Any, **options: Any) -> Any:
        command = str(args[0]).upper()
        if command == "EVALSHA":
            sent.append(f"EVALSHA {shas.get(args[1], args[1])}")
        elif command.startswith("FCALL") and args[1] != "emq_version":
            sent.append(f"FCALL {args[1]}")
        elif command.startswith("EMQ."):
            sent.append(command)
        return real(*args, **options)

    conn.client.execute_command = record
    return sent


def scripts_sha(name: str) -> str:
    import hashlib

    return hashlib.sha1(scripts.source(name).encode()).hexdigest()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_each_executor_runs_the_body_its_row_names(conn, connect_as, name):
    keys = [queue_key(Q, k) if k else base(Q) for k in KEYS[name]]
    for i, (executor, folded) in enumerate(
        (("script", False), ("script", True), ("function", False), ("native", False))
    ):
        c = connect_as(executor)
        sent = sent_by(c)
        try:
            c.run(name, keys, ARGS[name], folded=folded)
        except (NativeUnavailable, Gone):
            pass  # no EchoMQ module here; no row: the body was still sent
        # (EVALSHA goes twice the first time: NOSCRIPT, then the script is loaded)
        assert set(sent) == {BODIES[name][i]}, (executor, folded, sent)


def test_every_reply_kind_is_decoded_in_one_place():
    call = Call("x", args=("a", "b"), verb="remove", queue=Q, job="j_1")
    assert transitions.decode(Reply.CLAIMED, [], call) is None
    assert transitions.decode(Reply.CLAIMED, ["j_1", "{}", "2"], call) == Claimed("j_1", "{}", 2)
    with pytest.raises(Gone, match="remove mail j_1"):
        transitions.decode(Reply.FOUND, -1, call)
    assert transitions.decode(Reply.FOUND, "retry", call) == "retry"
    assert [transitions.decode(Reply.MORE_OR_OK, r, call) for r in (1, 0)] == ["more", "ok"]
    assert transitions.decode(Reply.COUNTED, [5, 1], call) == (5, True)
    assert transitions.decode(Reply.COUNTED, 7, call) == (7, False)  # EchoMQ's unbounded drain
    # the two budgets lead the ids; a step that spent its budget answers the first ids only
    per_id = Call("x", args=(1000, 1 << 20, "a", "b", "c"), verb="remove", queue=Q)
    assert transitions.decode(Reply.PER_ID, ["removed", "gone"], per_id) == {"a": "removed", "b": "gone"}
    with pytest.raises(ValueError):
        transitions.decode(Reply.PER_ID, ["removed"] * 4, per_id)
    assert transitions.decode(Reply.HOLDER, ["j_9", 0], call) == "j_9"
    assert transitions.decode(Reply.AS_SENT, {"k": 1}, call) == {"k": 1}
    refused = transitions.error("EMQSTATE not active", call)
    assert isinstance(refused, NotActive) and refused.reason == "not_active"
    assert str(transitions.error("ERR wrong", call)) == "server error in remove: ERR wrong"
    assert set(Reply) == {t.reply for t in transitions.TABLE.values()}  # every case is used


@pytest.mark.parametrize("executor", ["script", "function"])
def test_a_pipeline_takes_transitions_and_answers_their_results(conn, connect_as, executor):
    c = connect_as(executor)
    pipe = c.pipeline()
    for i in range(3):
        assert (
            jobs.enqueue(c, Q, f'{{"n": {i}}}', id=f"j_{i}", dedup="one" if i else None, pipeline=pipe)
            is None
        )
    keys = [queue_key(Q, "pending"), queue_key(Q, "active"), base(Q)]
    c.run("claim2", keys, [60_000, c.token], verb="claim", queue=Q, pipeline=pipe)
    pipe.zcard(queue_key(Q, "active"))  # a plain command in the same batch
    c.run("claim2", keys, [60_000, c.token], verb="claim", queue=Q, pipeline=pipe)
    jobs.fail(c, Q, "j_0", "boom", pipeline=pipe)
    assert pipe.execute() == [
        "j_0",
        "j_1",
        "j_1",
        Claimed("j_0", '{"n": 0}', 1),
        1,
        Claimed("j_1", '{"n": 1}', 1),
        "retry",
    ]
    # a refusal in a batch is the typed answer of that call; the batch ran
    pipe = c.pipeline()
    jobs.fail(c, Q, "j_1", "boom", pipeline=pipe)
    jobs.fail(c, Q, "j_0", "again", pipeline=pipe)
    with pytest.raises(NotActive, match="fail mail j_0"):
        pipe.execute()
    assert jobs.get_job(c, Q, "j_1")["state"] == "schedule"
    pipe = c.pipeline()
    jobs.fail(c, Q, "j_none", "boom", pipeline=pipe)
    with pytest.raises(Gone):
        pipe.execute()
    # the scripts are loaded for the batch even after a SCRIPT FLUSH
    conn.client.script_flush()
    pipe = c.pipeline()
    jobs.enqueue(c, Q, "{}", id="j_after", pipeline=pipe)
    assert pipe.execute() == ["j_after"]


def test_a_read_only_pipeline_refuses_a_writing_transition_before_any_io(conn, backend, request):
    from helpers import server_for, server_url

    srv = server_for(backend, request)
    ro = (
        emq.connect(embedded="fake", read_only=True)
        if backend == "fake"
        else emq.connect(server_url(backend, srv), read_only=True)
    )
    jobs.enqueue(conn, Q, "{}", id="j_1")
    before = dump(conn)
    pipe = ro.pipeline()
    with pytest.raises(ReadOnly):
        jobs.enqueue(ro, Q, "{}", id="j_2", pipeline=pipe)
    ro.run("read_rows", [base(Q)], [1, 1000, "payload", "j_1"], pipeline=pipe)
    ro.run("get_logs", [queue_key(Q, "job:j_1"), queue_key(Q, "job:j_1:logs"), base(Q)], [], pipeline=pipe)
    assert pipe.execute() == [[["{}"]], []]
    assert dump(conn) == before


# -- nobody else picks a body or lays out a script's call by hand --------------------------


def test_no_module_picks_a_body_by_executor():
    chosen = re.compile(r'run\(\s*"native_|executor\s*==|\.evalsha\(|register_script\(')
    for path in sorted(
        [*ROOT.glob("emq_notebook/**/*.py"), ROOT / "bench" / "common.py", ROOT / "bench" / "scale.py"]
    ):
        if path.name in ("transitions.py", "connector.py"):
            continue
        assert not chosen.search(path.read_text()), (path, chosen.search(path.read_text()))


def test_a_reader_follows_each_verb_to_its_script_in_three_files():
    """`%emq drain q`: verbs/queue.py (the handler calls admin.drain), admin.py
    (`conn.run("drain", ...)`), lua/drain.lua. The same for every verb whose
    catalogue entry names its scripts."""
    import importlib

    followed = 0
    for v in registry.VERBS.values():
        for entry in v.entries:
            module, function = entry.name.split(".")
            # the handler, or one of the verb modules (a handler may hand a variant on:
            # `%emq remove q --error ...` goes through verbs/bulk.py)
            verbs_text = "".join(p.read_text() for p in ROOT.glob("emq_notebook/verbs/*.py"))
            assert f"{module}.{function}(" in verbs_text, (v.name, entry.name)
            # the script's name, in the module of the Python verb
            source = inspect.getsource(importlib.import_module(f"emq_notebook.{module}"))
            for script in re.findall(r"@(\w+)", entry.script):
                assert (ROOT / "lua" / f"{script}.lua").is_file(), script
                assert script in transitions.TABLE, script
                assert f'"{script}"' in source, (entry.name, script)
                followed += 1
    assert followed >= 15
    # the issue's example, strictly: the handler names admin.drain, which names the script
    from emq_notebook.verbs import queue

    assert "admin.drain(" in inspect.getsource(queue._drain)
    assert 'conn.run("drain"' in inspect.getsource(admin.drain)
    assert catalogue.CATALOGUE["admin.drain"].script == "@drain" and (ROOT / "lua" / "drain.lua").is_file()


# -- lua/README.md: the convention and the table of every script ----------------------------


def test_the_lua_readme_table_is_read_from_the_headers():
    assert scripts.markdown() in (ROOT / "lua" / "README.md").read_text()


def test_every_script_beyond_echomqs_own_takes_the_base_root_last():
    """The convention of lua/README.md, read from each header: KEYS ends with the queue
    base root. EchoMQ's own transitions and their twins keep EchoMQ's layout."""
    own = {t.name for t in transitions.TABLE.values() if t.echomq}
    own |= {transitions.TABLE[n].twin for n in own if transitions.TABLE[n].twin}
    assert own == {
        "pause",
        "resume",
        "drain",
        "obliterate",
        "update_progress",
        "reprocess2",
        "remove_job2",
        "claim2",
        "gclaim2",
        "native_claim",
        "native_gclaim",
        "native_reprocess",
    }
    checked = 0
    for name in sorted(set(scripts.names()) - own):
        keys = dict(re.findall(r"KEYS\[(\d+)\] = ([^,;]+)", scripts.contract(name).keys))
        assert keys, name
        assert "the queue base root" in keys[max(keys, key=int)], (name, keys)
        assert "ARGV" not in scripts.contract(name).keys, name
        checked += 1
    assert checked >= 20


def test_the_library_runs_each_scripts_includes_once_at_load(conn):
    """In the library, a function's includes are defined when the library loads, and
    the function runs only the script's own text: the library loads on both backends,
    and a claim through it serves the head once."""
    _, body = scripts.library()
    assert conn.client.function_load(body, replace=True) in (scripts.LIBRARY, scripts.LIBRARY.encode())
    for name in scripts.names():
        own = (scripts.lua_dir() / f"{name}.lua").read_text()
        # the function's body is the script's own text without its include lines
        text = re.sub(r"^--@include \w+\s*$", "", own, flags=re.M)
        function = f"local function body(KEYS, ARGV)\n{text}\nend\n"
        assert f"{function}redis.register_function{{function_name='emq_{name}', callback=body" in body, name
    jobs.enqueue(conn, "lib", "x", id="j_1")
    keys = [queue_key("lib", "pending"), queue_key("lib", "active"), base("lib")]
    got = conn.client.fcall("emq_native_claim", 3, *keys, 60_000, "tok")
    assert [x.decode() if isinstance(x, bytes) else x for x in got] == ["j_1", "x", 1]
    assert jobs.claim(conn, "lib", 60_000) is None  # served once: the head left pending


def test_an_include_that_reads_a_global_at_its_top_level_cannot_load(valkey):
    """Why includes build their constants with plain Lua: where the library loads, no
    global but `redis` is readable (a function body, run later, may read them)."""
    import redis

    client = redis.Redis(port=valkey.port)
    ok = "#!lua name=probe\nlocal f = function() return math.floor(1.5) end\n"
    ok += "redis.register_function('emq_probe', function() return f() end)"
    assert client.function_load(ok, replace=True) == b"probe"
    assert client.fcall("emq_probe", 0) == 1
    bad = "#!lua name=probe\nlocal x = math.log(1.1)\n"
    bad += "redis.register_function('emq_probe', function() return 1 end)"
    with pytest.raises(redis.ResponseError, match="math"):
        client.function_load(bad, replace=True)
    client.function_delete("probe")


# -- The native twin: the function executor against the script executor, and the native line byte
# for byte.


def restore(conn, snapshot):
    """Put a dumped keyspace back exactly (scores and fields included)."""
    r = conn.client
    r.flushall()
    for key, (kind, val, has_ttl) in snapshot.items():
        if kind == "hash":
            r.hset(key, mapping=val)
        elif kind == "zset":
            r.zadd(key, dict(val))
        elif kind == "list":
            r.rpush(key, *val)
        elif kind == "set":
            r.sadd(key, *val)
        else:
            r.set(key, val)
        if has_ttl:
            r.pexpire(key, 60_000)


def flat_state(conn):
    ids = {}
    ids["dead"] = jobs.enqueue(conn, Q, "d", id="j_dead", max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.fail(conn, Q, "j_dead", "boom")
    ids["pending"] = jobs.enqueue(conn, Q, "p", id="j_pending")
    return ids


CASES = [
    ("reprocess dead", lambda c: jobs.reprocess_job(c, Q, "j_dead")),
    ("reprocess pending", lambda c: jobs.reprocess_job(c, Q, "j_pending")),
    ("reprocess missing", lambda c: jobs.reprocess_job(c, Q, "j_none")),
    ("claim", lambda c: jobs.claim(c, Q, 60_000)[:2]),
    ("claim paused", lambda c: (admin.pause(c, Q), jobs.claim(c, Q, 60_000))),
    ("update_data", lambda c: jobs.update_data(c, Q, "j_pending", "new")),
    ("remove", lambda c: jobs.remove_job(c, Q, "j_pending")),
    ("drain", lambda c: admin.drain(c, Q)),
]


def outcome(call, conn):
    try:
        return ("ok", call(conn))
    except Exception as exc:
        return ("refused", type(exc).__name__, getattr(exc, "reason", None))


def strip_volatile(snapshot):
    # the claim writes a lease deadline and `claimed_at` from the server clock, and
    # records a wait whose bucket depends on it: compare their presence and counts
    def steady(key, kind, v):
        if key.endswith(":active"):
            return [(m, 0) for m, _ in v]
        if ":lat:wait:" in key or ":lat:run:" in key:
            return sum(int(n) for n in v.values())
        if kind == "hash" and "claimed_at" in v:
            return {**v, "claimed_at": "<time>"}
        return v

    return {
        re.sub(r":lat:(\w+):\d+$", r":lat:\1:<minute>", k): (kind, steady(k, kind, v), ttl)
        for k, (kind, v, ttl) in snapshot.items()
    }


@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_function_executor_matches_the_script_for_flat_rows(conn, connect_as, name, call):
    flat_state(conn)
    start = dump(conn)
    script_reply = outcome(call, conn)
    script_after = dump(conn)
    restore(conn, start)
    assert dump(conn) == start
    fn = connect_as("function")
    fn.token = conn.token  # the same worker identity on the lock
    function_reply = outcome(call, fn)
    fn.client.function_flush()
    function_after = dump(conn)
    assert function_reply == script_reply
    assert strip_volatile(function_after) == strip_volatile(script_after)


def test_function_claim_is_one_round_trip(conn, connect_as):
    fn = connect_as("function")
    jobs.enqueue(fn, Q, "x")
    jobs.claim(fn, Q, 1000)  # loads the library
    jobs.enqueue(fn, Q, "y")
    sent = []
    real = fn.client.execute_command
    fn.client.execute_command = lambda *a, **k: (sent.append(a[0]), real(*a, **k))[1]
    admin.pause(fn, Q)
    sent.clear()
    assert jobs.claim(fn, Q, 1000) is None
    assert sent == ["FCALL"]
    script = connect_as("script")
    real2 = script.client.execute_command
    script.client.execute_command = lambda *a, **k: (sent.append(a[0]), real2(*a, **k))[1]
    sent.clear()
    assert jobs.claim(script, Q, 1000) is None  # paused: the HGET answers, no script runs
    assert sent == ["HGET"]
    admin.resume(script, Q)
    sent.clear()
    assert jobs.claim(script, Q, 1000)[1] == "y"
    assert sent[0] == "HGET" and sent[1] in ("EVALSHA", "EVAL")


def test_function_reprocess_refuses_a_grouped_dead_row(conn, connect_as):
    fn = connect_as("function")
    jid = jobs.enqueue(fn, Q, "x", group="acme", max_attempts=1)
    lanes.claim(fn, Q, 60_000)
    jobs.fail(fn, Q, jid, "boom")
    before = dump(conn)
    with pytest.raises(NotDead) as info:
        jobs.reprocess_job(fn, Q, jid)
    assert "reprocess lane not native" in info.value.detail
    assert dump(conn) == before
    jobs.reprocess_job(connect_as("script"), Q, jid)  # the script carries it to its lane
    assert conn.client.zrange(f"emq:{{{Q}}}:g:acme:pending", 0, -1) == [jid]


def test_native_line_is_echomqs_own_byte_for_byte(conn, connect_as):
    native = connect_as("native")
    sent = []

    def record(*args, **kw):
        sent.append(args)
        raise redis.ResponseError("ERR unknown command 'EMQ.REPROCESS'")

    native.client.execute_command = record
    from emq_notebook.errors import NativeUnavailable

    with pytest.raises(NativeUnavailable):
        jobs.reprocess_job(native, Q, "j_01ABC")
    assert (
        " ".join(map(str, sent[0]))
        == "EMQ.REPROCESS 4 emq:{mail}:job:j_01ABC emq:{mail}:dead emq:{mail}:pending emq:{mail}: j_01ABC"
    )


# -- Fenced means fenced: a transition either succeeds or refuses and changes nothing, whatever the
# row holds, whatever the arguments, whoever calls it late. On both backends and both executors
# (`script` and `function`): - a row (or a lane's meta) with a numeric field no transition can read
# -- written by another node or by hand -- is refused `BadRow` by every single-job transition with
# the keyspace byte-identical, and skipped (left where it is) by the bulk ones; - numeric arguments
# are bounded in Python before any I/O (and in Lua before a write); - a worker whose lease was lost
# cannot complete or fail a job another claim owns; - a ghost (a set member whose row is gone) is
# cleaned where a verb meets it and never stops a claim; obliterate's "ok" means nothing is left
# under `emq:{q}:`.
P = f"emq:{{{Q}}}:"
EXECUTORS = ("script", "function")
FIELDS = ("attempts", "failures", "stalled", "max_attempts", "backoff", "priority")
BAD = ("three", "", "1e999", "nan")
SHORT = 1  # a lease (or a delay) that is over a moment later: see `until_past`


@pytest.fixture(scope="module")
def clients():
    """One client per backend for the whole module (opened, and the function library
    loaded, once); each test still starts on a flushed keyspace."""
    return {}


def until_past(conn, key: str) -> None:
    """Wait until the server's clock is past every score in the sorted set `key` (lease
    deadlines, due times), polling its TIME: a millisecond or two, at most 5 seconds."""
    top = conn.client.zrange(key, -1, -1, withscores=True)
    due = top[0][1] if top else 0
    deadline = time.monotonic() + 5
    while True:
        seconds, micros = conn.client.time()
        if seconds * 1000 + micros // 1000 > due:
            return
        assert time.monotonic() < deadline, f"the server clock never passed {due} in {key}"
        time.sleep(0.001)


def corrupt(conn, job_id: str, field: str, value: str) -> None:
    conn.client.hset(P + "job:" + job_id, field, value)


def refused_unchanged(conn, call, cls=BadRow):
    """`call()` refuses with `cls` and the keyspace is byte-identical before and after."""
    before = dump(conn)
    with pytest.raises(cls):
        call()
    assert dump(conn) == before


def _expired(conn, ids, group=None):
    for job_id in ids:
        jobs.enqueue(conn, Q, job_id, id=job_id, group=group)
        (lanes.claim if group else jobs.claim)(conn, Q, SHORT)
    until_past(conn, P + "active")


def _dead(conn, ids, group=None):
    for job_id in ids:
        jobs.enqueue(conn, Q, job_id, id=job_id, max_attempts=1, group=group)
        got = (lanes.claim if group else jobs.claim)(conn, Q, 60_000)
        jobs.fail(conn, Q, got.id, "boom")


# -- 2. out-of-range arguments: refused before any I/O ---------------------------

OUT_OF_RANGE = [
    ("claim lease", lambda c: jobs.claim(c, Q, lease_ms=10**19)),
    ("claim lease over a year", lambda c: jobs.claim(c, Q, lease_ms=400 * 86_400_000)),
    ("grouped claim lease", lambda c: lanes.claim(c, Q, lease_ms=10**19)),
    ("priority", lambda c: jobs.enqueue(c, Q, "x", priority=10**20)),
    ("priority 2**53+1", lambda c: jobs.enqueue(c, Q, "x", priority=2**53 + 1)),
    ("delay", lambda c: jobs.enqueue(c, Q, "x", delay_ms=10**19)),
    ("backoff", lambda c: jobs.enqueue(c, Q, "x", backoff_ms=10**19)),
    ("max_attempts", lambda c: jobs.enqueue(c, Q, "x", max_attempts=2**53)),
    ("max_attempts float", lambda c: jobs.enqueue(c, Q, "x", max_attempts=2.0)),
    ("expire budget", lambda c: jobs.expire_leases(c, Q, budget=2**60)),
    ("promote budget", lambda c: jobs.promote(c, Q, budget=2**60)),
    ("drain budget", lambda c: admin.drain(c, Q, budget=2**60)),
    ("obliterate budget", lambda c: admin.obliterate(c, Q, budget=10**30)),
    ("keep", lambda c: jobs.add_log(c, Q, "j_1", "line", keep=2**64)),
    ("lane limit", lambda c: lanes.set_limit(c, Q, "acme", 10**20)),
    ("repeat every", lambda c: repeat.register(c, Q, "r", 10**19, "{}")),
    ("repeat max_attempts", lambda c: repeat.register(c, Q, "r", 1000, "{}", max_attempts=0)),
    ("tick max_jobs", lambda c: repeat.tick(c, Q, max_jobs=10**9)),
]


# -- 4. obliterate: "ok" means nothing is left -------------------------------------------


def _filler(conn, n: int) -> None:
    """Keys of another queue, so the keyspace is larger than one call's SCAN pass."""
    pipe = conn.client.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"emq:{{other}}:k{i}", "1")
    pipe.execute()


def _sweep_under_way(conn, ex, budget):
    """Bounded obliterate calls until the SCAN sweep has kept a cursor in meta."""
    for _ in range(1000):
        assert admin.obliterate(ex, Q, budget=budget) == "more"
        if conn.client.hget(P + "meta", "sweep") not in (None, "0"):
            return
    pytest.fail("the sweep never kept a cursor")


class TestFenced:
    @pytest.fixture
    def conn(self, backend, request, clients):
        return kept_conn(clients, backend, request)

    @pytest.fixture
    def connect_as(self, conn):
        """Another session on the same server (its own worker token): `connect_as("function")`."""
        return conn.with_executor

    @pytest.fixture(params=EXECUTORS)
    def ex(self, request, conn, connect_as):
        """The connection under test, with each executor."""
        return connect_as(request.param)

    # -- 1. a bad row refuses before the first write --------------------------------

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", BAD)
    def test_flat_claim_refuses_a_bad_head_and_pops_nothing(self, conn, ex, field, value):
        jobs.enqueue(conn, Q, "x", id="j_1")
        jobs.enqueue(conn, Q, "y", id="j_2")
        corrupt(conn, "j_1", field, value)
        refused_unchanged(conn, lambda: jobs.claim(ex, Q, 60_000))
        # the refusal names the field and the job, so the operator can act on it
        with pytest.raises(BadRow, match=f"{field} in j_1"):
            jobs.claim(ex, Q, 60_000)

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", ("three", "1e999"))
    def test_grouped_claim_refuses_a_bad_head_and_pops_nothing(self, conn, ex, field, value):
        jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
        corrupt(conn, "j_1", field, value)
        refused_unchanged(conn, lambda: lanes.claim(ex, Q, 60_000))

    @pytest.mark.parametrize("field", ("limit", "active"))
    @pytest.mark.parametrize("value", BAD)
    def test_grouped_claim_refuses_a_bad_lane_meta(self, conn, ex, field, value):
        jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
        conn.client.hset(P + "g:acme:meta", field, value)
        refused_unchanged(conn, lambda: lanes.claim(ex, Q, 60_000))

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", BAD)
    @pytest.mark.parametrize("verb", ("fail", "complete"))
    def test_fail_and_complete_refuse_a_bad_row(self, conn, connect_as, field, value, verb):
        for executor in EXECUTORS:
            c = connect_as(executor)
            c.client.flushall()
            jobs.enqueue(c, Q, "x", id="j_1", group="acme")
            jobs.enqueue(c, Q, "y", id="j_2")
            assert jobs.claim(c, Q, 60_000).id == "j_2"
            assert lanes.claim(c, Q, 60_000).id == "j_1"
            for job_id in ("j_1", "j_2"):
                corrupt(c, job_id, field, value)
                if verb == "fail":
                    refused_unchanged(c, lambda c=c, j=job_id: jobs.fail(c, Q, j, "boom"))
                else:
                    refused_unchanged(c, lambda c=c, j=job_id: jobs.complete(c, Q, j))

    def test_the_issue_example_a_bad_max_attempts_is_never_lost(self, conn, ex):
        """`max_attempts="three"` used to reach the row through repeat.register and
        strand the job in active on `fail`; now Python refuses it, and a row that
        holds it anyway (another node) is refused at the claim."""
        with pytest.raises(BadInput):
            repeat.register(ex, Q, "nightly", 1, "{}", max_attempts="three")
        assert dump(conn) == {}
        repeat.register(ex, Q, "nightly", 1, "{}", max_attempts=2)
        until_past(conn, P + "repeat")
        (made,) = repeat.tick(ex, Q)
        corrupt(conn, made, "max_attempts", "three")
        refused_unchanged(conn, lambda: jobs.claim(ex, Q, 60_000))
        assert conn.client.zscore(P + "pending", made) is not None

    @pytest.mark.parametrize("verb", ("complete", "fail"))
    def test_a_bad_lane_meta_or_metrics_keep_refuses_complete_and_fail(self, conn, ex, verb):
        jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
        lanes.claim(ex, Q, 60_000)
        finish = (
            (lambda: jobs.complete(ex, Q, "j_1"))
            if verb == "complete"
            else (lambda: jobs.fail(ex, Q, "j_1", "boom"))
        )
        conn.client.hset(P + "g:acme:meta", "active", "lots")
        refused_unchanged(conn, finish)
        conn.client.hset(P + "g:acme:meta", "active", "1")
        conn.client.hset(P + "meta", "metrics_keep", "a day")
        refused_unchanged(conn, finish)
        conn.client.hdel(P + "meta", "metrics_keep")
        finish()
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", BAD)
    def test_reprocess_refuses_a_bad_dead_row(self, conn, ex, field, value):
        jobs.enqueue(conn, Q, "x", id="j_1", max_attempts=1)
        jobs.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, "j_1", "boom")
        corrupt(conn, "j_1", field, value)
        refused_unchanged(conn, lambda: jobs.reprocess_job(ex, Q, "j_1"))

    def test_reprocess_refuses_a_grouped_row_whose_lane_meta_is_bad(self, conn):
        jobs.enqueue(conn, Q, "x", id="j_1", max_attempts=1, group="acme")
        lanes.claim(conn, Q, 60_000)
        jobs.fail(conn, Q, "j_1", "boom")
        conn.client.hset(P + "g:acme:meta", "limit", "nan")
        refused_unchanged(conn, lambda: jobs.reprocess_job(conn, Q, "j_1"))

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", BAD)
    def test_expire_skips_a_bad_row_and_leaves_it_in_active(self, conn, ex, field, value):
        _expired(conn, ["j_1", "j_2", "j_3"])
        corrupt(conn, "j_1", field, value)
        before = dump(conn)
        # the bad row costs its member of the budget, and the next call walks past it
        assert jobs.expire_leases(ex, Q, budget=1) == 0
        assert jobs.expire_leases(ex, Q, budget=1) == 1
        assert jobs.expire_leases(ex, Q) == 1
        assert jobs.expire_leases(ex, Q) == 0
        after = dump(conn)
        assert after[P + "job:j_1"] == before[P + "job:j_1"]
        assert [m for m, _ in after[P + "active"][1]] == ["j_1"]
        assert [m for m, _ in after[P + "pending"][1]] == ["j_2", "j_3"]

    def test_expire_skips_a_grouped_row_whose_lane_meta_is_bad(self, conn, ex):
        _expired(conn, ["j_1"], group="acme")
        _expired(conn, ["j_2"])
        conn.client.hset(P + "g:acme:meta", "active", "")
        before = dump(conn)
        assert jobs.expire_leases(ex, Q) == 1
        after = dump(conn)
        assert after[P + "g:acme:meta"] == before[P + "g:acme:meta"]
        assert after[P + "job:j_1"] == before[P + "job:j_1"]
        assert [m for m, _ in after[P + "active"][1]] == ["j_1"]

    @pytest.mark.parametrize("field", FIELDS)
    @pytest.mark.parametrize("value", BAD)
    def test_promote_skips_a_bad_row_and_leaves_it_scheduled(self, conn, ex, field, value):
        for job_id in ("j_1", "j_2"):
            jobs.enqueue(conn, Q, job_id, id=job_id, delay_ms=1)
        until_past(conn, P + "schedule")
        corrupt(conn, "j_1", field, value)
        before = dump(conn)
        # the bad row costs its member of the budget, and the next call walks past it
        assert jobs.promote(ex, Q, budget=1) == 0
        assert jobs.promote(ex, Q) == 1
        assert jobs.promote(ex, Q) == 0
        after = dump(conn)
        assert after[P + "job:j_1"] == before[P + "job:j_1"]
        assert [m for m, _ in after[P + "schedule"][1]] == ["j_1"]
        assert [m for m, _ in after[P + "pending"][1]] == ["j_2"]

    def test_reprocess_dead_skips_bad_rows_and_never_loops_on_them(self, conn, ex):
        _dead(conn, ["j_1", "j_2"])
        _dead(conn, ["j_3"], group="acme")
        _dead(conn, ["j_4"])
        corrupt(conn, "j_1", "attempts", "three")
        corrupt(conn, "j_2", "priority", "1e999")
        conn.client.hset(P + "g:acme:meta", "limit", "many")
        before = dump(conn)
        # budget 1 and three bad rows at the head: the loop still ends, having moved j_4
        assert admin.reprocess_dead(ex, Q, budget=1) == 1
        after = dump(conn)
        for job_id in ("j_1", "j_2", "j_3"):
            assert after[P + "job:" + job_id] == before[P + "job:" + job_id]
        assert [m for m, _ in after[P + "dead"][1]] == ["j_1", "j_2", "j_3"]
        assert [m for m, _ in after[P + "pending"][1]] == ["j_4"]
        assert admin.reprocess_dead(ex, Q) == 0

    def test_bulk_verbs_announce_what_they_skipped(self, conn, ex):
        _dead(conn, ["j_1"])
        corrupt(conn, "j_1", "failures", "x")
        sub = conn.client.pubsub()
        sub.subscribe(P + "events")
        sub.get_message(timeout=1)
        admin.reprocess_dead(ex, Q)
        msg = None
        for _ in range(20):
            msg = sub.get_message(timeout=0.2)
            if msg and msg["type"] == "message":
                break
        sub.close()
        assert msg and '"event":"bad_row"' in msg["data"] and '"job":"j_1"' in msg["data"]

    @pytest.mark.parametrize("field", FIELDS)
    def test_drain_reads_no_number_so_a_bad_row_drains(self, conn, ex, field):
        jobs.enqueue(conn, Q, "x", id="j_1", dedup="k1")
        jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
        corrupt(conn, "j_1", field, "three")
        corrupt(conn, "j_2", field, "three")
        assert admin.drain(ex, Q, budget=1) == 2
        assert consistency_problems(conn, Q) == []
        assert conn.client.exists(P + "job:j_1", P + "job:j_2") == 0

    def test_obliterate_goes_through_bad_rows_and_bad_lane_meta(self, conn, ex):
        jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
        jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
        lanes.claim(conn, Q, 60_000)
        corrupt(conn, "j_1", "attempts", "three")
        conn.client.hset(P + "g:acme:meta", "active", "lots")
        admin.pause(conn, Q)
        calls = 0
        while admin.obliterate(ex, Q, force=True, budget=1) == "more":
            calls += 1
            assert calls < 50
        assert keys_of(conn, Q) == []

    def test_repeat_tick_skips_a_bad_definition(self, conn, ex):
        repeat.register(ex, Q, "good", 1, "{}")
        repeat.register(ex, Q, "bad", 1, "{}")
        defs = P + "repeat:defs"
        for bad in (
            '{"every": "soon", "payload": "{}"}',
            "not json",
            '{"every": 1}',
            '{"every": 1, "payload": "{}", "max_attempts": "three"}',
        ):
            conn.client.hset(defs, "bad", bad)
            conn.client.zadd(P + "repeat", {"bad": 0})
            until_past(conn, P + "repeat")
            before = dump(conn)
            made = repeat.tick(ex, Q, max_jobs=1)
            assert len(made) == 1 and jobs.get_job(conn, Q, made[0])["payload"] == "{}"
            after = dump(conn)
            assert after[defs] == before[defs]
            assert dict(after[P + "repeat"][1])["bad"] == 0

    @pytest.mark.parametrize("name,call", OUT_OF_RANGE, ids=[n for n, _ in OUT_OF_RANGE])
    def test_out_of_range_arguments_refused_before_any_io(self, conn, ex, name, call):
        jobs.enqueue(conn, Q, "x", id="j_1")
        jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
        before = dump(conn)
        with pytest.raises(BadInput):
            call(ex)
        assert dump(conn) == before

    def test_the_largest_whole_numbers_are_stored_exactly(self, conn, ex):
        jobs.enqueue(ex, Q, "x", id="j_1", priority=MAX_WHOLE, max_attempts=MAX_WHOLE)
        row = jobs.get_job(conn, Q, "j_1")
        assert row["priority"] == str(MAX_WHOLE) and row["max_attempts"] == str(MAX_WHOLE)
        assert conn.client.zscore(P + "pending", "j_1") == MAX_WHOLE

    def test_a_claim_script_called_with_a_bad_lease_writes_nothing(self, conn, ex):
        """Another node calling the script with a lease SET PX cannot take is refused
        before the pop (the Python side never sends one)."""
        jobs.enqueue(conn, Q, "x", id="j_1")
        jobs.enqueue(conn, Q, "y", id="j_2", group="acme")
        keys = [P + "pending", P + "active", base(Q)]
        for lease in ("10000000000000000000", "0", "1.5", "soon"):
            for name in ("claim2", "gclaim2"):
                before = dump(conn)
                k = keys if name == "claim2" else [P + "ring", *keys[1:]]
                with pytest.raises(EMQError):
                    conn.run(name, k, [lease, "tok"])
                assert dump(conn) == before

    # -- 3. a stale worker cannot win ---------------------------------------------------

    @pytest.mark.parametrize("verb", ("complete", "fail"))
    @pytest.mark.parametrize("group", (None, "acme"))
    def test_a_worker_whose_lease_was_lost_is_refused_not_owner(self, conn, connect_as, verb, group):
        for executor in EXECUTORS:
            first, second = connect_as(executor), connect_as(executor)
            conn.client.flushall()
            claim = lanes.claim if group else jobs.claim
            jobs.enqueue(conn, Q, "x", id="j_1", group=group, max_attempts=5)
            assert claim(first, Q, SHORT).id == "j_1"
            until_past(conn, P + "active")
            assert jobs.expire_leases(conn, Q) == 1
            assert claim(second, Q, 60_000) == ("j_1", "x", 2)
            stale = (
                (lambda first=first: jobs.complete(first, Q, "j_1"))
                if verb == "complete"
                else (lambda first=first: jobs.fail(first, Q, "j_1", "late"))
            )
            refused_unchanged(conn, stale, NotOwner)
            jobs.complete(second, Q, "j_1")
            assert consistency_problems(conn, Q) == []

    def test_the_owner_is_on_the_row_so_an_expired_lock_key_does_not_open_the_fence(self, conn, ex):
        other = ex.with_executor(ex.executor)
        jobs.enqueue(conn, Q, "x", id="j_1")
        jobs.claim(ex, Q, 60_000)
        conn.client.delete(P + "job:j_1:lock")  # the PX lock key gone, the job still in active
        refused_unchanged(conn, lambda: jobs.fail(other, Q, "j_1", "late"), NotOwner)
        assert jobs.fail(ex, Q, "j_1", "boom") == "retry"

    def test_claimed_is_a_named_tuple_of_three(self, conn):
        jobs.enqueue(conn, Q, "x", id="j_1")
        got = jobs.claim(conn, Q, 60_000)
        assert got == ("j_1", "x", 1) and got.id == "j_1" and got.payload == "x" and got.attempts == 1
        assert jobs.Claimed._fields == ("id", "payload", "attempts")

    def test_worker_survives_a_lost_lease_and_a_vanished_job(self, conn, connect_as, caplog):
        thief = connect_as("script")
        for i in range(3):
            jobs.enqueue(conn, Q, str(i), id=f"j_{i}", max_attempts=5)

        def handler(job_id, payload, attempts):
            if job_id == "j_0":  # the lease runs out and another worker takes it
                until_past(conn, P + "active")
                jobs.expire_leases(thief, Q)
                jobs.claim(thief, Q, 60_000)
            elif job_id == "j_1":  # an operator finished it under the worker
                jobs.complete(conn, Q, job_id)
                raise RuntimeError("and then the handler failed")

        w = Worker(conn, Q, handler, lease_ms=SHORT * 5)
        with caplog.at_level(logging.WARNING, logger="emq_notebook.worker"):
            assert w.run(max_jobs=3) == 3
        assert (w.completed, w.failed, w.lost) == (1, 0, 2)
        assert sum("refused" in r.getMessage() for r in caplog.records) == 2

    def test_worker_survives_a_claim_refused_bad_row(self, conn, caplog):
        jobs.enqueue(conn, Q, "x", id="j_1")
        corrupt(conn, "j_1", "attempts", "three")
        w = Worker(conn, Q, lambda *a: None, idle_sleep=0)
        with caplog.at_level(logging.WARNING, logger="emq_notebook.worker"):
            assert w.run(max_jobs=1, until_empty=True) == 0
        assert w.bad_rows == 1 and "bad row" in caplog.text

    # -- 5. ghosts ------------------------------------------------------------------------

    def test_remove_cleans_a_ghost_and_still_answers_gone(self, conn, ex):
        for state in ("pending", "active", "schedule", "dead"):
            conn.client.zadd(P + state, {"ghost": 1})
        jobs.enqueue(conn, Q, "x", id="j_1", group="acme")
        conn.client.zadd(P + "g:acme:pending", {"ghost": 0})
        with pytest.raises(Gone):
            jobs.remove_job(ex, Q, "ghost")
        assert consistency_problems(conn, Q) == []
        # an id in no set: gone, and nothing at all changes
        refused_unchanged(conn, lambda: jobs.remove_job(ex, Q, "j_none"), Gone)

    def test_remove_jobs_cleans_ghosts(self, conn, ex):
        conn.client.zadd(P + "dead", {"ghost": 1})
        jobs.enqueue(conn, Q, "x", id="j_1")
        assert admin.remove_jobs(ex, Q, ["ghost", "j_1"]) == {"ghost": "gone", "j_1": "removed"}
        assert keys_of(conn, Q) == [P + "meta"]

    # -- 7. an id given twice ------------------------------------------------------------------

    def test_remove_jobs_answers_what_happened_to_an_id_given_twice(self, conn, ex):
        jobs.enqueue(conn, Q, "x", id="a")
        jobs.enqueue(conn, Q, "y", id="b")
        jobs.claim(conn, Q, 60_000)  # a is held now
        jobs.enqueue(conn, Q, "z", id="c")
        assert admin.remove_jobs(ex, Q, ["c", "a", "c", "b", "a", "none", "none"]) == {
            "c": "removed",
            "a": "locked",
            "b": "removed",
            "none": "gone",
        }
        assert list(admin.remove_jobs(ex, Q, ["c", "a", "c"])) == ["c", "a"]
        assert consistency_problems(conn, Q) == []

    def test_reprocess_dead_drops_ghosts_uncounted(self, conn, ex):
        _dead(conn, ["j_1"])
        conn.client.zadd(P + "dead", {"ghost": 0, "ghost2": 1})
        assert admin.reprocess_dead(ex, Q) == 1
        assert conn.client.zcard(P + "dead") == 0
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("group", (None, "acme"))
    def test_a_ghost_at_the_head_never_stops_a_claim(self, conn, ex, group):
        jobs.enqueue(conn, Q, "x", id="j_1", group=group)
        jobs.enqueue(conn, Q, "y", id="j_2", group=group)
        pending = P + ("g:acme:pending" if group else "pending")
        conn.client.zadd(pending, {"a_ghost": -1, "b_ghost": -1})
        claim = lanes.claim if group else jobs.claim
        assert claim(ex, Q, 60_000).id == "j_1"
        if group:
            lanes.set_limit(conn, Q, group, 2)
        assert claim(ex, Q, 60_000).id == "j_2"
        assert claim(ex, Q, 60_000) is None
        assert consistency_problems(conn, Q) == []

    def test_expire_and_promote_drop_ghosts_uncounted(self, conn, ex):
        _expired(conn, ["j_1"])
        jobs.enqueue(conn, Q, "s", id="j_2", delay_ms=1)
        until_past(conn, P + "schedule")
        conn.client.zadd(P + "active", {"ghost": 0})
        conn.client.zadd(P + "schedule", {"ghost": 0})
        assert jobs.expire_leases(ex, Q) == 1
        assert jobs.promote(ex, Q) == 1
        assert consistency_problems(conn, Q) == []

    @pytest.mark.parametrize("filler", (0, 6000))
    def test_obliterate_finds_keys_made_between_bounded_calls(self, conn, ex, filler):
        _filler(conn, filler)
        for i in range(150):
            jobs.enqueue(conn, Q, str(i), id=f"j_{i:03d}")
        admin.pause(conn, Q)
        assert admin.obliterate(ex, Q, budget=100) == "more"
        # orphans made by hand (or by another node) while the sweep is half-way
        pipe = conn.client.pipeline(transaction=False)
        for i in range(300):
            pipe.rpush(P + f"job:o{i}:logs", "line")
        pipe.execute()
        calls = 0
        while admin.obliterate(ex, Q, budget=100) == "more":
            calls += 1
            assert calls < 1000
        assert keys_of(conn, Q) == []
        # and one key more than the filler: the queue's audit stream, outside its footprint
        assert conn.client.dbsize() == filler + 1 and conn.client.exists(audit_key(Q))

    # -- 1. (again) the metrics record never fails a transition half-way ----------------------

    @pytest.mark.parametrize("verb", ("complete", "fail"))
    @pytest.mark.parametrize("damage", ("bucket", "type"))
    def test_a_damaged_metrics_hash_never_strands_a_job(self, conn, ex, verb, damage):
        """complete and fail bump the metrics after their writes: a bucket that holds no
        count (or a metrics key that is not a hash) once raised there, leaving a failed
        job in no set at all."""
        kind = "completed" if verb == "complete" else "failed"
        jobs.enqueue(conn, Q, "x", id="j_1")
        jobs.claim(ex, Q, 60_000)
        key = P + "metrics:" + kind
        if damage == "bucket":
            for minute in range(int(time.time() // 60) - 1, int(time.time() // 60) + 3):
                conn.client.hset(key, str(minute), "lots")
        else:
            conn.client.set(key, "not a hash")
        if verb == "complete":
            jobs.complete(ex, Q, "j_1")
        else:
            assert jobs.fail(ex, Q, "j_1", "boom") == "retry"
        assert consistency_problems(conn, Q) == []
        if damage == "bucket":
            assert "1" in conn.client.hvals(key)
        else:
            assert conn.client.get(key) == "not a hash"

    def test_a_resumed_queue_is_swept_again_from_the_beginning(self, conn, ex):
        """The issue's reproduction: a bounded obliterate leaves its cursor in meta; the
        queue is resumed and gets more keys (orphan logs, no job in any set), then is
        paused and obliterated again. The old cursor would skip the keys behind it and
        answer "ok" with keys left; resume restarts the sweep."""
        _filler(conn, 6000)
        for i in range(150):
            jobs.enqueue(conn, Q, str(i), id=f"j_{i:03d}")
        admin.pause(conn, Q)
        _sweep_under_way(conn, ex, budget=100)
        admin.resume(ex, Q)
        pipe = conn.client.pipeline(transaction=False)
        for i in range(300):
            pipe.rpush(P + f"job:o{i}:logs", "line")
        pipe.execute()
        admin.pause(ex, Q)
        calls = 0
        while admin.obliterate(ex, Q, budget=100) == "more":
            calls += 1
            assert calls < 1000
        assert keys_of(conn, Q) == []
        assert conn.client.dbsize() == 6000 + 1 and conn.client.exists(audit_key(Q))
