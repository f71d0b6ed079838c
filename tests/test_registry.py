"""The verb registry is the one place a verb is declared: every front end reads it."""

import pytest
from documentation import ALL as README

from emq_notebook import catalogue, grammar, registry, verbs
from emq_notebook.completion import Completer

VERBS = list(registry.VERBS.values())


def test_the_registry_holds_the_verbs():
    assert {
        "connect",
        "use",
        "connections",
        "pause",
        "drain",
        "obliterate",
        "jobs",
        "reprocess",
        "help",
    } <= set(registry.VERBS)


@pytest.mark.parametrize("v", VERBS, ids=[v.name for v in VERBS])
def test_every_verb_has_a_handler_help_and_its_readme_rows(v):
    # declared in a module of the verbs package
    assert callable(v.handler) and v.handler.__module__.startswith("emq_notebook.verbs.")
    assert v.summary.strip()
    text = grammar.verb_help(v.name)
    assert v.summary in text
    for a in v.args:
        assert a.names[0] in text or str(grammar._metavar(a)) in text
    assert f"  {grammar.usage(v.name)}\n      {v.summary}" in grammar.grammar()
    for entry in v.entries:
        assert catalogue.CATALOGUE[entry.name] is entry
        e = entry
        assert f"| `{e.name}` | `{e.script}` | {e.precondition} | {e.replies} | {e.native} |" in README


def test_every_catalogue_entry_belongs_to_a_verb():
    declared = {e.name for v in VERBS for e in v.entries}
    assert declared == set(catalogue.CATALOGUE)


def test_completion_offers_every_verb_and_each_verbs_options():
    completer = Completer(verbs.Session(say=lambda _l: None))
    assert completer.words("") == [*registry.VERBS, "-h", "--help"]
    for v in VERBS:
        long_options = {n for a in v.args if a.is_option for n in a.names if n.startswith("--")}
        assert set(completer.words(f"{v.name} --")) == long_options | {"--help"}


def test_a_verb_declared_twice_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        registry.verb("pause", "again")(lambda s, ns: None)


@pytest.fixture
def shout():
    yield
    registry.VERBS.pop("shout", None)


def test_a_new_verb_is_one_declaration(shout):
    # declared in a test, then gone: the grammar, help and completion see it at once
    @registry.verb(
        "shout",
        "say a queue's name loudly",
        registry.arg("queue"),
        registry.opt("--times", type=grammar.whole_arg, default=1),
    )
    def _shout(s, ns):
        s.say(" ".join([ns.queue.upper()] * ns.times))

    said = []
    session = verbs.Session(say=said.append)
    verbs.execute(session, grammar.parse("shout mail --times 2"))
    assert said == ["MAIL MAIL"]
    assert "shout QUEUE [--times N]" in grammar.grammar()
    assert Completer(session).words("sh") == ["shout"]


def test_every_writing_verb_declares_the_functions_it_writes_through():
    # catalogue.writers() is the one list to wrap every write a verb makes: each
    # writing verb has its functions there, and each function there a writing verb
    writing = {v.name for v in VERBS if v.writes}
    by_verb = {op.verb for op in catalogue.writers()}
    assert by_verb == writing
    named = {op.name for op in catalogue.writers()}
    assert {
        "admin.pause",
        "admin.resume",
        "admin.drain",
        "admin.obliterate",
        "admin.obliterate_all",
        "jobs.update_data",
        "jobs.update_progress",
        "jobs.add_log",
        "jobs.remove_job",
        "jobs.reprocess_job",
        "moves.reprocess_jobs",
        "moves.reprocess_dead",
        "moves.remove_jobs",
        "jobs.promote_job",
        "repeat.run_now",
        "lanes.set_limit",
        "lanes.pause_lane",
        "lanes.resume_lane",
        "jobs.enqueue",
        "jobs.claim",
        "lanes.claim",
        "jobs.complete",
        "jobs.fail",
        "transfer.import_file",
        "transfer.move_jobs",
        "transfer.finish_moves",
    } == named


def test_a_reading_verb_runs_no_writer():
    reading = {v.name for v in VERBS if not v.writes}
    assert not [op.name for op in catalogue.writers() if op.verb in reading]
    assert {"jobs.get_job", "triage.find"} <= {
        op.name for op in catalogue.OPERATIONS.values() if not op.writes
    }


def test_the_lane_verbs_read_and_write_apart():
    assert not registry.VERBS["lane"].writes and not registry.VERBS["lane"].options
    assert registry.VERBS["lane-set"].writes
