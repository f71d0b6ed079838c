"""The key builders are byte-exact and the gate refuses before any I/O."""

import re
from pathlib import Path

import pytest
from mailq import Q

import emq_notebook as emq
from emq_notebook import admin, jobs, keyspace
from emq_notebook.errors import EMQError, InvalidName
from emq_notebook.keyspace import MAX_SERVER_ID


def test_keys_are_byte_exact():
    assert keyspace.queue_key("mail", "") == "emq:{mail}:"
    assert keyspace.queue_key("mail", "meta") == "emq:{mail}:meta"
    assert keyspace.job_key("mail", "j_1") == "emq:{mail}:job:j_1"
    assert keyspace.logs_key("mail", "j_1") == "emq:{mail}:job:j_1:logs"
    assert keyspace.lock_key("mail", "j_1") == "emq:{mail}:job:j_1:lock"
    assert keyspace.lane_key("mail", "acme") == "emq:{mail}:g:acme:pending"
    assert keyspace.events_channel("mail") == "emq:{mail}:events"
    assert keyspace.queue_from_key("emq:{mail}:job:j_1") == "mail"
    assert keyspace.queue_from_key("other:key") is None
    assert keyspace.metrics_key("mail", "claimed") == "emq:{mail}:metrics:claimed"
    assert keyspace.latency_key("mail", "wait", 29_000_000) == "emq:{mail}:lat:wait:29000000"
    assert keyspace.latency_key("mail", "run", 7) == "emq:{mail}:lat:run:7"
    assert keyspace.latency_index_key("mail") == "emq:{mail}:lat:minutes"
    for bad in (
        lambda: keyspace.metrics_key("mail", "x"),
        lambda: keyspace.latency_key("mail", "x", 1),
        lambda: keyspace.latency_key("mail", "wait", "1}"),
    ):
        with pytest.raises(InvalidName):
            bad()


@pytest.mark.parametrize(
    "bad",
    ["", "a{b", "a}b", "a:b", "a b", "a\tb", "a\nb", "a\x00b", "a*b", "a?b", "a[b]", "é", "x" * 129, None, 7],
)
def test_gate_refuses_bad_names(bad):
    with pytest.raises(InvalidName) as info:
        keyspace.queue_key(bad, "meta")
    assert isinstance(info.value, ValueError) and isinstance(info.value, EMQError)
    with pytest.raises(InvalidName):
        keyspace.job_key("mail", bad)


def test_ids_are_branded_and_sort_in_the_order_made():
    ids = [keyspace.new_id() for _ in range(2000)]
    assert all(i.startswith("j_") and len(i) == 28 for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_gate_runs_before_any_io():
    # nothing listens on port 1: a verb that reached the wire would raise WireError
    conn = emq.connect("redis://127.0.0.1:1/0")
    for call in (
        lambda: admin.pause(conn, "bad:name"),
        lambda: admin.drain(conn, "{x}"),
        lambda: jobs.enqueue(conn, "mail", "{}", id="a b"),
        lambda: jobs.reprocess_job(conn, "mail", "j\x00"),
        lambda: jobs.get_job(conn, "", "j_1"),
        lambda: admin.remove_jobs(conn, "mail", ["ok", 7]),  # an id read from a set is any string
    ):
        with pytest.raises(InvalidName):
            call()
    with pytest.raises(emq.WireError):
        admin.pause(conn, "fine")


def test_every_walk_of_a_queues_sets_counts_a_lane_another_node_named(conn):
    """A lane name read from the server (`tenant 42`, "") fails the name gate, yet the
    counts, the backlog a drain would delete and the job count address it as it is:
    every walk of a queue's sets takes its keys from `keyspace.sets` / `lane_sets`."""
    jobs.enqueue(conn, "mail", "{}", id="j_ok", group="acme")
    for lane, job_id in (("tenant 42", "j_t42"), ("", "j_empty")):
        conn.client.hset(f"emq:{{mail}}:job:{job_id}", mapping={"payload": "{}", "group": lane})
        conn.client.zadd(f"emq:{{mail}}:g:{lane}:pending", {job_id: 0})
        conn.client.sadd("emq:{mail}:groups", lane)
    assert [g for g, _ in keyspace.lane_sets("mail", ["tenant 42", "acme", ""])] == ["", "acme", "tenant 42"]
    assert admin.backlog(conn, "mail") == admin.job_count(conn, "mail") == 3
    assert emq.frames.counts(conn, ["mail"]).loc["mail", "pending"] == 3


def test_a_name_read_from_the_server_is_addressed_as_it_is_and_a_typed_one_is_gated():
    assert keyspace.lane_key("mail", "tenant 42", gate=False) == "emq:{mail}:g:tenant 42:pending"
    assert keyspace.lane_meta_key("mail", "tenant 42", gate=False) == "emq:{mail}:g:tenant 42:meta"
    assert keyspace.job_key("mail", "ord:17", gate=False) == "emq:{mail}:job:ord:17"
    for build in (keyspace.lane_key, keyspace.lane_meta_key, keyspace.job_key):
        with pytest.raises(InvalidName):
            build("mail", "tenant 42")


def test_lane_and_job_keys_are_built_in_keyspace_only():
    """One home for a key's shape: no other module writes `g:<name>:` or `job:` + an id."""
    package = Path(keyspace.__file__).parent
    hand_built = re.compile(r"""f?["']g:\{?|["']job:["'] \+""")
    found = [
        f"{path.relative_to(package)}:{n}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "keyspace.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if hand_built.search(line)
    ]
    assert found == []


# -- Do no harm, ids another node wrote long: a move can count a member's id only after it has read
# it, so what a call reads of a set must follow what its byte budget may still spend, not its budget
# of members. Both backends, each call under the harness's watchdog (tests/harm.py); what a call
# reads is counted from the set reads its script sends (MONITOR on Valkey, a spy on the embedded
# server), never timed.


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


# -- Fenced means fenced, round 2 (issue 28): a verb does what it was told and no more, data written
# by other nodes never breaks a tool, secrets stay out of the record.


@pytest.mark.parametrize("name", ["-h", "--yes", "--help", "-1", "-"])
def test_a_name_read_as_an_option_is_refused_by_the_gate(name):
    from emq_notebook.errors import InvalidName
    from emq_notebook.keyspace import check_name, job_key, queue_key

    for call in (lambda: check_name(name), lambda: queue_key(name, "pending"), lambda: job_key(Q, name)):
        with pytest.raises(InvalidName, match="starts with -"):
            call()
    assert check_name("a-b") == "a-b" and check_name("x-") == "x-"
