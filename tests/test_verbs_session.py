"""verbs/session.py: a session's output while a command runs, and its connections after a
failed connect (a read-only session's refusals: tests/test_connector.py)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import dump

import emq_notebook as emq
from emq_notebook import admin, frames, verbs
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


# -- Sessions (read-only, env, name): a read-only connection refuses every writing verb with
# `ReadOnly` before any I/O and leaves the keyspace byte-identical, while reads, frames and job
# reads work; the refusal is declared per Lua script (`--@readonly`) and per plain command
# (`READING_COMMANDS`).

# -- a failed connect: no server guessed in place of the one asked for (#41.2) ------------

FAILED_CONNECTS = [
    "connect redis://127.0.0.1:1/0 --env production",  # a typo'd port: nothing listens
    "connect redis://u:pw-Kq7@127.0.0.1:1/0 --embedded fake",  # a URL and --embedded
    "connect nowhere:6379 --env production",  # not a URL
    "connect redis://u:pw-Kq7@127.0.0.1:1/0 --env",  # a line that does not parse
    "connect redis://127.0.0.1:1/0 redis://u:pw-Kq7@127.0.0.1:2/0",  # nor this one, naming a password
]


@pytest.fixture
def unconnected(ip: Any, conn: emq.Connection, monkeypatch: Any) -> Any:
    """The notebook's session with no connection yet, its default (`%emq connect` with
    no URL: EMQ_URL, else the embedded fakeredis) on `conn`'s server; put back after."""
    from as_written import default_server

    from emq_notebook import magics

    default_server(conn, monkeypatch)
    session = magics.SESSION
    kept = dict(session.connections), session.current
    session.connections.clear()
    session.current = session.failed = None
    yield session
    session.connections.clear()
    session.connections.update(kept[0])
    session.current, session.failed = kept[1], None


def typed_in(ip: Any, line: str) -> tuple[Any, list[str]]:
    """(the ExecutionResult, the lines it printed) of a cell holding `line`."""
    from IPython.utils.capture import capture_output

    with capture_output() as out:
        result = ip.run_cell(line)
    return result, (out.stdout + out.stderr).strip().splitlines()


@pytest.mark.parametrize("line", FAILED_CONNECTS)
def test_after_a_failed_connect_every_verb_refuses_until_one_succeeds(
    ip: Any, unconnected: Any, conn: emq.Connection, line: str
) -> None:
    """With no connection current, a connect that fails (a typo'd port, a bad URL, a
    line that does not parse) leaves none: the next write and read refuse in one line
    that fails the cell, and nothing is written to the default server, where the
    write used to land. Fails before: `pause mailers` printed "paused mailers"."""
    result, said = typed_in(ip, f"%emq {line}")
    assert isinstance(result.error_in_exec, emq.EMQError), said
    assert len(said) == 1 and said[0].split(": ", 1)[1].startswith("connect failed: "), said
    assert "no connection is current" in said[0] and "pw-Kq7" not in said[0]
    for attempt, what in (("pause mailers", "pause mailers"), ("queues", "queues")):
        result, said = typed_in(ip, f"%emq {attempt}")
        assert isinstance(result.error_in_exec, emq.UsageProblem), said
        assert len(said) == 1 and said[0].startswith(f"UsageProblem: {what}: no connection is current: ")
        assert "pw-Kq7" not in said[0]
        assert "the last connect failed (" in said[0] and "%emq connect URL, or %emq use NAME" in said[0]
    with pytest.raises(emq.UsageProblem, match="no connection is current"):
        emq.current()
    assert dump(conn) == {} and unconnected.current is None
    # a connect that succeeds ends it: the write goes where the operator asked
    assert typed_in(ip, "%emq connect")[0].success
    assert typed_in(ip, "%emq pause mailers")[0].success
    assert admin.is_paused(conn, "mailers")


def test_use_after_a_failed_connect_makes_a_kept_connection_current(
    ip: Any, unconnected: Any, conn: emq.Connection
) -> None:
    """`%emq use NAME` ends the refusals as a successful connect does."""
    unconnected.connections["kept"] = conn
    assert not typed_in(ip, f"%emq {FAILED_CONNECTS[0]}")[0].success
    assert not typed_in(ip, "%emq pause mailers")[0].success
    assert typed_in(ip, "%emq use kept")[0].success
    assert typed_in(ip, "%emq pause mailers")[0].success and admin.is_paused(conn, "mailers")


@pytest.mark.parametrize("line", FAILED_CONNECTS)
def test_a_failed_connect_says_which_connection_is_still_current(
    ip: Any, unconnected: Any, conn: emq.Connection, line: str
) -> None:
    """Another connection current: the failure line names it (name, label, env), and a
    verb after it runs there, as told. Fails before: the line said nothing of it."""
    target = "--embedded fake" if conn.label == "embedded fakeredis" else conn.label
    assert typed_in(ip, f"%emq connect {target} --name staging --env staging")[0].success
    result, said = typed_in(ip, f"%emq {line}")
    assert isinstance(result.error_in_exec, emq.EMQError), said
    assert len(said) == 1 and "pw-Kq7" not in said[0], said
    assert said[0].endswith(f"; still using staging ({conn.label}, env staging)"), said
    assert unconnected.current == "staging"
    result, said = typed_in(ip, "%emq pause mailers")
    assert result.success and said == ["paused mailers: claims answer empty; the backlog is untouched"]
    assert admin.is_paused(conn, "mailers")


def test_an_env_or_a_reason_holding_a_urls_password_is_shown_without_it(
    ip: Any, unconnected: Any, conn: emq.Connection
) -> None:
    """An env label and the session's reason are free text an operator types; a URL's
    password in them is shown nowhere: not in the connect line, the confirmations
    (`where`), `%emq connections`, the reason's echo, nor the audit entry. (The
    hostile pass of #41: the connect line showed `env=failing over to
    redis://admin:pw-E1@…` and `%emq reason` echoed its password while the entry held
    it scrubbed.)"""
    target = "--embedded fake" if conn.label == "embedded fakeredis" else conn.label
    ip.user_ns["label"] = "prod via redis://admin:pw-E1@replica/0"
    result, said = typed_in(ip, f"%emq connect {target} --name p --env {{{{label}}}}")
    assert result.success and said == [
        f"connected: {conn.label} (env=prod via redis://admin:***@replica/0, executor=script) as p"
    ]
    result, said = typed_in(ip, "%emq reason failing over to rediss://u:pw-E2@replica:6380/0")
    assert result.success and said == [
        "reason: failing over to rediss://u:***@replica:6380/0 (each audit entry of this session says it)"
    ]
    assert typed_in(ip, "%emq reason")[1] == ["reason: failing over to rediss://u:***@replica:6380/0"]
    assert "pw-E1" not in unconnected.where()
    assert typed_in(ip, "%emq pause mailers")[0].success
    entry = frames.audit(conn, "mailers").iloc[0]
    assert entry["env"] == "prod via redis://admin:***@replica/0", entry
    assert "pw-E2" not in entry["reason"] and "***" in entry["reason"]
    typed_in(ip, "%emq reason --clear")
