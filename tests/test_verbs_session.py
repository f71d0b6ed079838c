"""verbs/session.py: a session's output while a command runs (the rest of the session's
verbs: tests/test_sessions.py)."""

from __future__ import annotations

import pytest

from emq_notebook import verbs
from emq_notebook.verbs.session import _last_line

NOTE = " · audit_failed: pause q not recorded (lost)"


def test_a_command_s_last_line_waits_for_the_audit_note_and_say_is_never_rebound():
    said: list[str] = []
    session = verbs.Session(say=said.append)
    with _last_line(session) as last:
        assert "say" not in vars(session)  # the method, not a function put in its place
        session.say("one")
        session.say("two")
        assert said == ["one"]  # "two" may be the last: it waits
        last.suffix = NOTE
    assert said == ["one", "two" + NOTE]
    session.say("after")  # outside a command: said at once
    assert said[-1] == "after"


def test_a_command_that_said_nothing_says_the_note_alone():
    said: list[str] = []
    session = verbs.Session(say=said.append)
    with _last_line(session) as last:
        last.suffix = NOTE
    assert said == [NOTE.removeprefix(" · ")]


def test_a_command_that_raised_says_its_lines_as_they_were():
    said: list[str] = []
    session = verbs.Session(say=said.append)
    with pytest.raises(KeyError), _last_line(session) as last:
        session.say("one")
        last.suffix = NOTE
        raise KeyError("x")
    assert said == ["one"]
