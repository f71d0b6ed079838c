"""The verb registry is the one place a verb is declared: every front end reads it."""

from pathlib import Path

import pytest

from emq_notebook import catalogue, grammar, registry, verbs
from emq_notebook.completion import Completer

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
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
        registry.opt("--times", type=grammar.whole, default=1),
    )
    def _shout(s, ns):
        s.say(" ".join([ns.queue.upper()] * ns.times))

    said = []
    session = verbs.Session(say=said.append)
    verbs.execute(session, grammar.parse("shout mail --times 2"))
    assert said == ["MAIL MAIL"]
    assert "shout QUEUE [--times N]" in grammar.grammar()
    assert Completer(session).words("sh") == ["shout"]
