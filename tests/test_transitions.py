"""The transition table (emq_notebook/transitions.py): every Lua script has its row,
each executor runs the body its row names, every reply kind is decoded in one place,
a pipeline takes transitions, and a reader follows `%emq VERB` to its script by
names, in three files."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import dump

import emq_notebook as emq
from emq_notebook import admin, catalogue, jobs, registry, scripts, transitions
from emq_notebook.errors import Gone, NativeUnavailable, NotActive, ReadOnly
from emq_notebook.keyspace import base, queue_key
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
    # the example, strictly: the handler names admin.drain, which names the script
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
