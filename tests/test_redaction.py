"""Passwords out of every line shown or recorded (emq_notebook/redaction.py).

Secrets, on a real Valkey: a password in a URL never appears in any repr, exception, log
line, magic output, shell output or saved notebook. (The toolkit as an ACL user limited to
`~emq:*` keys and `&emq:*` channels, the README's ACL line: tests/test_connector.py.)"""

import json
import logging
import subprocess
import sys
from typing import Any

import pytest
import redis
from acl import SECRET, USER
from nbtools import execute, notebook

import emq_notebook as emq
from emq_notebook import admin
from emq_notebook.errors import EMQError, WireError


def test_a_password_never_appears_anywhere(
    operator_url: Any, valkey: Any, tmp_path: Any, caplog: Any, ip: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    said: list[str] = []
    port = valkey.port
    wrong = operator_url.replace(SECRET, SECRET + "-wrong")
    nowhere = f"redis://{USER}:{SECRET}@127.0.0.1:1/0"

    conn = emq.connect(operator_url)
    said += [repr(conn), str(conn), conn.label]
    for url in (wrong, nowhere):
        c = emq.connect(url)
        said += [repr(c)]
        with pytest.raises(WireError) as info:
            admin.pause(c, "mail")
        said += [str(info.value), repr(info.value), *info.value._render_traceback_()]
    with pytest.raises(EMQError) as bad:
        emq.connect(f"redis://{USER}:{SECRET}@127.0.0.1:notaport/0")
    said.append(str(bad.value))

    # the magic, in an in-process shell
    from IPython.utils.capture import capture_output

    from emq_notebook.magics import SESSION

    try:
        with capture_output() as out:
            for line in (
                f"%emq connect {operator_url}",
                "%emq status mail",
                f"%emq connect {wrong}",
                "%emq pause mail",
                f"%emq connect {nowhere}",
                "%emq queues",
                "%emq?",
            ):
                ip.run_cell(line)
        said += [out.stdout, out.stderr]
    finally:
        SESSION.conn = emq.connect(embedded="fake")

    # the shell command: the three runs start now and are read after the notebook below
    # (each is a fresh interpreter; side by side with the kernel they cost one wait)
    shells = [
        subprocess.Popen(
            [sys.executable, "-m", "emq_notebook.cli", "--url", url, "status", "mail"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for url in (operator_url, wrong, nowhere)
    ]

    said += [r.getMessage() for r in caplog.records]

    # a saved notebook, its outputs stored as a person's "Run all" stores them (the
    # cell sources hold what the operator typed; the outputs are ours)
    nb = notebook(
        tmp_path / "secret.ipynb",
        "%load_ext emq_notebook",
        f"%emq connect {operator_url}",
        "%emq status mail",
        "import emq_notebook as e; e.current()",
        f"%emq connect {wrong}",
        "%emq pause mail",
    )
    outputs = json.dumps([c.get("outputs") for c in execute(nb, env={"EMQ_URL": ""}).cells])
    assert "authentication failed" in outputs and "connected: redis://operator:***@" in outputs
    said.append(outputs)
    try:
        for shell in shells:
            said += shell.communicate(timeout=60)
    finally:
        for shell in shells:
            shell.kill()  # only one still running (a failed test) is signalled
    leaks = [s for s in said if SECRET in s]
    assert leaks == []
    assert any(f"operator:***@127.0.0.1:{port}" in s for s in said)


QUERY_SECRET = "hunter2-Zq9-query"


def said_by(url: str) -> list[str]:
    """Everything a connection to `url` shows, and every line its failed verb shows."""
    conn = emq.connect(url, cluster=False)
    said = [repr(conn), str(conn), conn.label, conn.describe()]
    with pytest.raises(EMQError) as info:
        admin.pause(conn, "mail")
    return [*said, str(info.value), repr(info.value), *info.value._render_traceback_()]


@pytest.mark.parametrize(
    "query", ["password={}", "db=0&password={}", "password={}&db=0", "socket_timeout=5&password={}"]
)
def test_a_query_string_password_is_never_shown(query: Any) -> None:
    url = f"redis://127.0.0.1:1/0?{query.format(QUERY_SECRET)}"
    said = said_by(url)
    assert [s for s in said if QUERY_SECRET in s] == []
    assert emq.connect(url).label == f"redis://127.0.0.1:1/0?{query.format('***')}"


def test_a_query_string_password_is_used_and_a_wrong_one_reads_authentication_failed(valkey: Any) -> None:
    admin_client = redis.Redis(port=valkey.port)
    admin_client.config_set("requirepass", QUERY_SECRET)
    try:
        right = f"redis://127.0.0.1:{valkey.port}/0?password={QUERY_SECRET}"
        conn = emq.connect(right)
        admin.pause(conn, "mail")  # redis-py reads the query credential
        assert admin.is_paused(conn, "mail")
        assert conn.label == f"redis://127.0.0.1:{valkey.port}/0?password=***"
        for url in (
            right.replace(QUERY_SECRET, QUERY_SECRET + "-wrong"),
            right.replace(QUERY_SECRET, "x" + QUERY_SECRET),
            f"redis://127.0.0.1:{valkey.port}/0",
        ):  # none at all: NOAUTH
            said = said_by(url)
            assert [s for s in said if QUERY_SECRET in s] == []
            assert "authentication failed" in said[4] and "lost the server" not in said[4]
            with pytest.raises(WireError):
                admin.pause(emq.connect(url), "mail")
    finally:
        redis.Redis(port=valkey.port, password=QUERY_SECRET).config_set("requirepass", "")


@pytest.mark.parametrize(
    "url",
    [
        f"redis://u:{SECRET}@[::1/0",
        f"redis://:{SECRET}@[::1:6379",
        f"redis://u:{SECRET}@h:port/0",
        f"valkey://[::1/0?password={SECRET}",
        f"rediss://u:{SECRET.replace('-', '%2D')}@[::1/0",
        f"redis://127.0.0.1:1/0?Password={SECRET}",  # not an option
        f"redis://127.0.0.1:1/0?db=0&passwd={SECRET}",
    ],
)
def test_a_malformed_url_is_one_typed_line_without_the_password(url: Any) -> None:
    with pytest.raises(emq.BadInput) as info:
        emq.connect(url)
    said = [str(info.value), *info.value._render_traceback_()]
    assert [s for s in said if SECRET in s or SECRET.replace("-", "%2D") in s] == []
    assert said[0].startswith("cannot use ") and "***" in said[0]


def test_redact_never_fails_and_hides_every_credential() -> None:
    cases = {
        "redis://u:pw@h:1/0": "redis://u:***@h:1/0",
        "redis://:pw@h:1/0?db=2": "redis://:***@h:1/0?db=2",
        "redis://h:1/0?password=pw&db=2": "redis://h:1/0?password=***&db=2",
        "unix:///tmp/v.sock?db=0&password=pw": "unix:///tmp/v.sock?db=0&password=***",
        "redis://u:p@w@h/0": "redis://u:***@h/0",
        "redis://u:pw@[::1/0": "redis://u:***@[::1/0",
        "redis://u@h/0?username=u": "redis://u@h/0?username=u",
        "not a url at all": "not a url at all",
    }
    for url, shown in cases.items():
        assert emq.connector.redact(url) == shown


def test_scrub_takes_each_urls_password_out_of_a_text_wherever_it_stands() -> None:
    """`scrub`, the one redaction of every text shown or recorded, finds a URL anywhere
    in free text (an operator's reason, a server's error), each of several, and the
    session's secrets."""
    from emq_notebook.redaction import scrub

    cases = {
        "failing over to redis://admin:pw1@replica/0": "failing over to redis://admin:***@replica/0",
        "from redis://a:pw1@h1/0 to\tvalkeys://b:pw2@h2/0?password=pw3 now": (
            "from redis://a:***@h1/0 to\tvalkeys://b:***@h2/0?password=*** now"
        ),
        "(redis://a:pw1@h/0),\nnext line": "(redis://a:***@h/0),\nnext line",
        "no url here: a:b@c": "no url here: a:b@c",
    }
    for text, shown in cases.items():
        assert scrub(text) == shown
    assert scrub("said pw-9 to redis://u:pw-9@h/0", ("pw-9",)) == "said *** to redis://u:***@h/0"
    # a text that is one URL reads as its label does
    assert scrub("redis://u:pw@h:1/0?db=2&token=t") == emq.connector.redact("redis://u:pw@h:1/0?db=2&token=t")


def test_secrets_of_a_text_holding_several_urls_are_each_urls() -> None:
    """A shell word may hold blanks and several URLs (`--from 'to redis://a:pw1@h and
    rediss://b:pw2@h'`); an error line may show it changed so that no URL is left to
    find (a path's `//` made `/`): each URL's password is among its secrets. (The
    hostile pass of #41: only the first URL's was, and `emq import --from` showed the
    others'.)"""
    from emq_notebook.redaction import scrub, secrets_of

    text = "to redis://a:pw1@h/0 and rediss://b:pw2@h:6380/1, redis://h/0?password=pw3 (valkey://c:p%41w4@h)"
    found = secrets_of(text)
    assert {"pw1", "pw2", "pw3", "p%41w4", "pAw4"} <= set(found)
    normalised = text.replace("://", ":/")  # as pathlib shows it
    assert [s for s in ("pw1", "pw2", "pw3", "p%41w4") if s in scrub(normalised, found)] == []
    # a password with a blank in it (percent-decoded) is still found whole
    assert "p w" in secrets_of("redis://u:p%20w@h/0")
