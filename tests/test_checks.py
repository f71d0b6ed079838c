"""Checks of the values a verb is given (emq_notebook/checks.py), run before any I/O.

Bad input, by property: every shape of name the gate must refuse is refused
before any I/O; malformed JSON, non-positive budgets and leases, unknown states
and bad durations are each one typed error, and nothing is written (the whole
keyspace is compared before and after, on both backends).

Budget: each property runs EXAMPLES inputs (the gate properties twice that).
"""

from __future__ import annotations

import json
import re

import pytest
from helpers import dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emq_notebook as emq
from emq_notebook import admin, frames, grammar, jobs, keyspace, lanes
from emq_notebook.errors import BadInput, EMQError, InvalidName, UsageProblem

EXAMPLES = 150
SAFE = re.compile(r"[A-Za-z0-9_.@+][A-Za-z0-9_.@+\-]{0,127}\Z")  # no leading -: an option
on_a_backend = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# names that could escape their key: braces, colons, whitespace, control
# characters, NUL, glob characters, unicode, empty, huge
hostile = st.one_of(
    st.text(min_size=0, max_size=300).filter(lambda s: not SAFE.match(s)),
    st.builds(
        lambda a, c, b: a + c + b,
        st.text(alphabet="abc", max_size=5),
        st.sampled_from(list("{}:*?[] \t\n\r\x00\x7f") + ["é", "名", "\u200b", "🦄"]),
        st.text(alphabet="abc", max_size=5),
    ),
    st.text(alphabet="ab", min_size=129, max_size=5000),
    st.just(""),
)
safe = st.from_regex(SAFE, fullmatch=True)

# every entry point that takes a queue name and/or a job id, reaching the wire if the gate let it
VERBS = {
    "pause": lambda c, q, i: admin.pause(c, q),
    "drain": lambda c, q, i: admin.drain(c, q),
    "obliterate": lambda c, q, i: admin.obliterate(c, q),
    "snapshot": lambda c, q, i: frames.snapshot(c, q),
    "status": lambda c, q, i: frames.counts(c, [q]),
    "enqueue": lambda c, q, i: jobs.enqueue(c, q, "{}", id=i),
    "enqueue_group": lambda c, q, i: jobs.enqueue(c, q, "{}", group=i),
    "claim": lambda c, q, i: jobs.claim(c, q),
    "data": lambda c, q, i: jobs.update_data(c, q, i, "{}"),
    "progress": lambda c, q, i: jobs.update_progress(c, q, i, 1),
    "log": lambda c, q, i: jobs.add_log(c, q, i, "x"),
    "logs": lambda c, q, i: jobs.get_job_logs(c, q, i),
    "remove": lambda c, q, i: jobs.remove_job(c, q, i),
    "reprocess": lambda c, q, i: jobs.reprocess_job(c, q, i),
    "job": lambda c, q, i: jobs.get_job(c, q, i),
    "remove_jobs": lambda c, q, i: admin.remove_jobs(c, q, ["fine", i]),
    "lane_limit": lambda c, q, i: lanes.set_limit(c, q, i, 2),
}


@pytest.fixture(scope="module")
def nowhere():
    # nothing listens on port 1: anything that reached the wire would raise WireError
    return emq.connect("redis://127.0.0.1:1/0")


@settings(max_examples=2 * EXAMPLES, deadline=None)
@given(bad=hostile, good=safe, verb=st.sampled_from(sorted(VERBS)))
def test_the_gate_refuses_every_hostile_name_before_any_io(nowhere, bad, good, verb):
    call = VERBS[verb]
    with pytest.raises(InvalidName):
        call(nowhere, bad, good)  # a hostile queue name
    # the bulk verbs take ids as the server holds them (tests/test_moves.py)
    if verb not in ("pause", "drain", "obliterate", "snapshot", "status", "claim", "remove_jobs"):
        with pytest.raises(InvalidName):
            call(nowhere, good, bad)  # a hostile job id, group or id in a list


@settings(max_examples=2 * EXAMPLES, deadline=None)
@given(name=safe)
def test_every_safe_name_builds_its_key_and_reads_back(name):
    key = keyspace.job_key(name, name)
    assert key == f"emq:{{{name}}}:job:{name}"
    assert keyspace.queue_from_key(key) == name


not_json = st.text(max_size=60).filter(lambda s: not _parses(s))


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


@on_a_backend
@given(text=not_json)
def test_malformed_json_is_refused_and_nothing_written(conn, text):
    from emq_notebook import verbs

    jid = jobs.enqueue(conn, "mail", '{"ok": 1}', id="j_1")
    session = verbs.Session(say=lambda _line: None)
    session.conn = conn
    before = dump(conn)
    for line in (["data", "mail", jid, text], ["enqueue", "mail", text]):
        # text that looks like an option ("-x") stops at the parser, the rest at the JSON check
        with pytest.raises((BadInput, UsageProblem)) as info:
            verbs.execute(session, grammar.parse(line))
        assert isinstance(info.value, UsageProblem) or "malformed JSON" in str(info.value)
    assert dump(conn) == before


not_positive = st.one_of(
    st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=5), st.none()
)


@on_a_backend
@given(value=not_positive)
def test_budgets_leases_and_limits_must_be_whole_and_positive(conn, value):
    jobs.enqueue(conn, "mail", "{}", id="j_1")
    before = dump(conn)
    calls = [
        lambda: admin.drain(conn, "mail", budget=value),
        lambda: admin.obliterate(conn, "mail", budget=value),
        lambda: admin.reprocess_dead(conn, "mail", budget=value),
        lambda: jobs.claim(conn, "mail", value),
        lambda: lanes.claim(conn, "mail", value),
        lambda: jobs.expire_leases(conn, "mail", value),
        lambda: lanes.set_limit(conn, "mail", "acme", value),
    ]
    if value is not None:  # keep=None is "no trim", a real choice
        calls.append(lambda: jobs.add_log(conn, "mail", "j_1", "x", keep=value))
    for call in calls:
        with pytest.raises(BadInput):
            call()
    assert dump(conn) == before


@on_a_backend
@given(state=st.text(max_size=20).filter(lambda s: s not in (*keyspace.STATES, "all")))
def test_an_unknown_state_is_bad_input(conn, state):
    with pytest.raises(BadInput, match="unknown state"):
        frames.snapshot(conn, "mail", state)
    with pytest.raises(UsageProblem):
        grammar.parse(["jobs", "mail", "--state", state])


@settings(max_examples=EXAMPLES, deadline=None)
@given(text=st.text(max_size=12).filter(lambda s: not re.fullmatch(r"\s*\d+(\.\d+)?(ms|s|m|h|d)?\s*", s)))
def test_a_bad_duration_is_a_usage_problem(text):
    with pytest.raises(UsageProblem, match="bad duration"):
        grammar.duration_ms(text)
    with pytest.raises(UsageProblem):
        grammar.parse(["enqueue", "mail", "{}", "--delay", text])


@settings(max_examples=EXAMPLES, deadline=None)
@given(words=st.lists(st.text(max_size=10), max_size=6))
def test_any_command_line_parses_or_raises_one_typed_line(words):
    # fuzz the grammar: never a bare argparse SystemExit or traceback
    try:
        grammar.parse(words)
    except EMQError as exc:
        rendered = exc._render_traceback_()
        assert len(rendered) == 1


# half of a character pair (pasted cut, or built by code): no encoding writes it
LONE = ["half \ud83d", "\ude00 tail", "a\ud800b", "é\udbff"]


@pytest.mark.parametrize("text", LONE)
def test_a_lone_surrogate_is_bad_input_and_nothing_written(conn, text):
    """A text holding half of a character pair is refused in one line before anything is
    sent (hiredis' packer would raise a raw UnicodeEncodeError); an undecodable byte read
    from the server (a surrogate `surrogateescape` made) still goes back as that byte."""
    jid = jobs.enqueue(conn, "mail", "{}", id="j_1")
    jobs.claim(conn, "mail", 60_000)
    before = dump(conn)
    for call in (
        lambda: jobs.fail(conn, "mail", jid, text),
        lambda: jobs.add_log(conn, "mail", jid, text),
        lambda: jobs.update_data(conn, "mail", jid, json.dumps({"note": text}, ensure_ascii=False)),
    ):
        with pytest.raises(BadInput, match="lone surrogate"):
            call()
    assert dump(conn) == before
    jobs.add_log(conn, "mail", jid, "byte \udcff kept")
    assert conn.client.lrange(f"emq:{{mail}}:job:{jid}:logs", 0, -1) == ["byte \udcff kept"]


def test_a_lone_surrogate_among_many_ids_is_refused_before_the_first_call(conn):
    """A bulk verb sends its ids in calls of a budget each: an id no server can hold,
    700th of 800, is refused before the first call goes, so no job moved and no record
    says otherwise (it used to remove 250 and record nothing)."""
    ids = jobs.enqueue_many(conn, "mail", ["{}"] * 800)
    ids[700] = "x\ud800"
    before = dump(conn)
    for bulk in (admin.remove_jobs, admin.reprocess_jobs):
        with pytest.raises(BadInput, match="lone surrogate"):
            bulk(conn, "mail", ids, budget=100)
    assert dump(conn) == before
    assert frames.audit(conn, "mail").empty


def test_a_lone_surrogate_among_many_payloads_is_refused_before_the_first_call(conn):
    payloads = ["{}"] * 20 + [json.dumps({"note": "half \ud83d"}, ensure_ascii=False)]
    before = dump(conn)
    with pytest.raises(BadInput, match="lone surrogate"):
        jobs.enqueue_many(conn, "mail", payloads, chunk=1)
    assert dump(conn) == before


def test_bad_input_raised_after_a_write_went_is_recorded_as_an_error(conn):
    """`BadInput` alone writes no record (nothing was attempted); once a writing
    transition went inside the recorded call, the record stays, outcome `error`."""
    from emq_notebook import audit

    ids = jobs.enqueue_many(conn, "mail", ["{}"] * 3)
    with pytest.raises(BadInput), audit.recorded(conn, "remove", "mail"):
        raise BadInput("refused before anything went")
    with pytest.raises(BadInput), audit.recorded(conn, "remove", "mail"):
        admin.remove_jobs(conn, "mail", ids[:2])
        raise BadInput("refused after the first call wrote")
    entries = frames.audit(conn, "mail")
    assert entries.verb.tolist() == ["remove"] and entries.outcome[0] == "error"
