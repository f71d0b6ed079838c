"""Secrets and access, on a real Valkey: a password in a URL never appears in
any repr, exception, log line, magic output, shell output or saved notebook;
and the toolkit works as an ACL user limited to `~emq:*` keys and `&emq:*`
channels (the README's ACL line, tested as written)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
import redis

import emq_notebook as emq
from emq_notebook import admin, events, frames, jobs, lanes
from emq_notebook.errors import EMQError, WireError
from nbtools import execute, notebook

SECRET = "pw-7Hq2-never-shown"
USER = "operator"
# the README's line, byte for byte (tests/test_readme.py checks it is there)
ACL = ["ACL", "SETUSER", USER, "on", f">{SECRET}", "resetkeys", "~emq:*",
       "resetchannels", "&emq:*", "+@all", "-@dangerous"]


@pytest.fixture
def operator_url(valkey):
    admin_client = redis.Redis(port=valkey.port, decode_responses=True)
    admin_client.flushall()
    admin_client.execute_command(*ACL)
    yield f"redis://{USER}:{SECRET}@127.0.0.1:{valkey.port}/0"
    admin_client.execute_command("ACL", "DELUSER", USER)


def test_an_acl_user_limited_to_emq_keys_and_channels_runs_every_verb(operator_url, valkey):
    for executor in ("script", "function"):
        conn = emq.connect(operator_url, executor=executor)
        q = f"acl-{executor}"
        seen = []
        tail = events.Tail(conn, q, seen.append, seconds=5)    # needs &emq:*
        dead = jobs.enqueue(conn, q, "{}", id="j_dead", max_attempts=1, dedup="once")
        jobs.enqueue(conn, q, "{}", id="j_lane", group="acme")
        assert jobs.claim(conn, q, 60_000)[0] == dead
        jobs.fail(conn, q, dead, "boom")
        jobs.reprocess_job(conn, q, dead)
        assert lanes.claim(conn, q, 60_000)[0] == "j_lane"
        jobs.update_data(conn, q, dead, '{"mended": true}')
        jobs.update_progress(conn, q, dead, 50)
        assert jobs.add_log(conn, q, dead, "line", keep=1) == 1
        assert q in frames.counts(conn).index                 # SCAN under ~emq:*
        assert len(frames.snapshot(conn, q)) == 2
        admin.drain(conn, q)
        admin.pause(conn, q)
        assert admin.obliterate_all(conn, q, force=True) >= 1
        assert conn.scan(f"emq:{{{q}}}:*") == []
        tail.stop()
        assert tail.error is None and {"added", "reprocessed", "progress"} <= {e["event"] for e in seen}
    # the limit is real: a key outside emq:* is refused to this user
    conn = emq.connect(operator_url)
    with pytest.raises(redis.exceptions.NoPermissionError):
        conn.client.set("not-ours", "1")
    with pytest.raises(EMQError, match="server error in HGET"):
        conn.command("HGET", "not-ours", "x")


def test_a_password_never_appears_anywhere(operator_url, valkey, tmp_path, caplog, ip):
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
    with pytest.raises(EMQError) as info:
        emq.connect(f"redis://{USER}:{SECRET}@127.0.0.1:notaport/0")
    said.append(str(info.value))

    # the magic, in an in-process shell
    from IPython.utils.capture import capture_output
    from emq_notebook.magics import SESSION
    try:
        with capture_output() as out:
            for line in (f"%emq connect {operator_url}", "%emq status mail", f"%emq connect {wrong}",
                         "%emq pause mail", f"%emq connect {nowhere}", "%emq queues", "%emq?"):
                ip.run_cell(line)
        said += [out.stdout, out.stderr]
    finally:
        SESSION.conn = emq.connect(embedded="fake")

    # the shell command
    for url in (operator_url, wrong, nowhere):
        run = subprocess.run([sys.executable, "-m", "emq_notebook.cli", "--url", url, "status", "mail"],
                             capture_output=True, text=True, timeout=60)
        said += [run.stdout, run.stderr]

    said += [r.getMessage() for r in caplog.records]

    # a saved notebook, its outputs stored as a person's "Run all" stores them (the
    # cell sources hold what the operator typed; the outputs are ours)
    nb = notebook(tmp_path / "secret.ipynb", "%load_ext emq_notebook",
                  f"%emq connect {operator_url}", "%emq status mail", "import emq_notebook as e; e.current()",
                  f"%emq connect {wrong}", "%emq pause mail")
    outputs = json.dumps([c.get("outputs") for c in execute(nb, env={"EMQ_URL": ""}).cells])
    assert "authentication failed" in outputs and "connected: redis://operator:***@" in outputs
    said.append(outputs)
    leaks = [s for s in said if SECRET in s]
    assert leaks == []
    assert any(f"operator:***@127.0.0.1:{port}" in s for s in said)
