"""The two live demos (ClaimGate, OperatorConsole) driven in Python on both backends."""

import html
import re

import pytest

from emq_notebook import admin, catalogue, frames, jobs
from emq_notebook.widgets import ClaimGate, OperatorConsole
from emq_notebook.widgets import operator_console as oc

COMBOS = [(v, s) for v in oc.VERBS for s in oc.STATES]


def test_the_claim_gate_matches_jobs_claim(conn, connect_as):
    ids = [jobs.enqueue(conn, "gate", f'{{"n": {i}}}') for i in range(3)]
    gate = ClaimGate(conn, "gate")
    gate.gate.value = True  # pause through the toggle
    assert admin.is_paused(conn, "gate")
    assert gate.run_claim() is None
    assert "claim answered empty (paused); the backlog is untouched: 3 pending" == gate.status_text
    assert "HGET emq:{gate}:meta paused" in gate.trips.value and "no script ran" in gate.trips.value
    assert conn.client.zrange("emq:{gate}:pending", 0, -1) == ids
    gate.gate.value = False
    got = gate.run_claim()
    assert got[0] == ids[0] and gate.status_text == f"claimed {ids[0]}: pending -> active (attempts 1)"
    assert "EVALSHA claim2" in gate.trips.value
    # the same queue state, claimed directly, gives the next job: the gate is jobs.claim
    assert jobs.claim(connect_as(), "gate", 1000)[0] == ids[1]
    fn_gate = ClaimGate(connect_as("function"), "gate")
    assert fn_gate.run_claim()[0] == ids[2]
    assert "one round trip: FCALL" in fn_gate.trips.value


@pytest.mark.parametrize("verb,state", COMBOS, ids=[f"{v}|{s}" for v, s in COMBOS])
def test_every_console_combination_shows_the_real_reply(conn, verb, state):
    console = OperatorConsole(conn, scratch="console")
    console.verb.value, console.state.value = verb, state
    shown, changes = console.try_it()
    # the same state built again, the verb called directly
    oc.build(conn, "direct", state)
    real = oc.reply_text(oc.run(conn, "direct", verb))
    # a row's times (created_at, claimed_at, due_at) are the clock at build time: the
    # fields allowed to differ
    clock = re.compile(r"'(created_at|claimed_at|due_at)': '\d+'")
    assert clock.sub("", shown) == clock.sub("", real.replace("direct", "console"))
    if shown.startswith("refused"):
        assert changes == []  # a refusal changes nothing
    assert html.escape(catalogue.describe(oc.VERBS[verb][0])) in console.about.value
    # a click is recorded as one, when the verb writes
    newest = frames.audit(conn, "console", limit=1)
    if catalogue.OPERATIONS[oc.VERBS[verb][0]].writes:
        assert newest.surface.tolist() == ["panel"]


def test_the_catalogue_feeds_the_docstrings():
    from emq_notebook import jobs as j

    for name, entry in catalogue.CATALOGUE.items():
        mod, fn = name.split(".")
        doc = getattr(__import__(f"emq_notebook.{mod}", fromlist=[fn]), fn).__doc__
        doc = " ".join(doc.split())  # a value of a declared block may go on over lines
        assert f"precondition: {entry.precondition}" in doc and f"replies: {entry.replies}" in doc
    assert j.reprocess_job.__doc__.count("EMQ.REPROCESS 4") == 1
