"""The README tells the truth: its verbs table is the catalogue's."""

from pathlib import Path

import pytest
from as_written import default_server, statements, typed
from documentation import ALL, README, block, section
from own_process import stop

import emq_notebook
from emq_notebook import catalogue, demo, magics


def test_readme_verbs_table_is_generated_from_the_catalogue():
    assert catalogue.markdown() in ALL


def test_readme_opens_with_the_two_commands():
    first = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert "emq_notebook.demo" in first[0] and "pytest" in first[1]


def test_the_readme_says_what_the_suite_needs_and_how_long_it_takes():
    """(#41.5) The suite's time on 2 cores, and the browser tests' Chromium: the path
    they look for, and the package `.ci/run` installs before the README's steps."""
    tests = Path(__file__).resolve().parent
    assert 'CHROMIUM = Path("/usr/bin/chromium")' in (tests / "test_browser.py").read_text()
    first = README.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert first[0].startswith("python3 -m venv .venv && . .venv/bin/activate && ")  # PEP 668
    said = " ".join(README.split("```bash", 1)[1].split("```", 2)[1].split())
    assert "about 11 minutes on 2 idle cores" in said and "(`-n auto`)" in said
    assert "at `/usr/bin/chromium`" in said and "Debian's `chromium`" in said and "`.ci/run` installs" in said
    ci = (tests.parent / ".ci" / "run").read_text()
    assert "apt-get install -y -qq chromium" in ci and ci.rstrip().endswith("python -m pytest")


def test_the_first_command_runs_without_a_warning():
    """`python -m emq_notebook.demo` as the README's first line gives it: no
    RuntimeWarning (the package does not import `demo` itself), and `emq.demo` is
    still there for the runbooks."""
    import os
    import subprocess
    import sys

    import emq_notebook as emq

    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "emq_notebook.demo"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "EMQ_URL": ""},
    )
    assert (out.returncode, out.stderr) == (0, "")
    assert "footprint now 0 keys" in out.stdout
    assert callable(emq.demo.fresh)


def test_readme_acl_line_is_the_one_tested():
    from acl import ACL

    line = " ".join(ACL).replace(ACL[4], ">PASSWORD")
    assert f"`{line}`" in ALL


# -- "A magic session", executed as written, line by line, on both backends -----------

SESSION_BLOCK = block("A magic session")
# a comment that starts like one of these is the line's printed answer, and is checked
ANSWERS = ("paused ", "no job claimed", "data replaced", "refused:", "resumed ", "using ", "connected:")


@pytest.fixture
def session_on(conn, monkeypatch, ip):
    default_server(conn, monkeypatch)
    yield conn
    ip.run_line_magic("config", "EMQMagics.default_limit = 1000")


def test_the_magic_session_runs_as_written(ip, session_on, capfd):
    import emq_notebook
    from emq_notebook import magics

    lines = [ln for ln in SESSION_BLOCK.strip().splitlines() if ln.strip()]
    assert len(lines) >= 15
    for line in lines:
        result, out, comment = typed(ip, capfd, line)
        assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
        if comment.startswith(ANSWERS):
            expected = comment.replace(
                "default: embedded fakeredis (executor=script)", f"default: {session_on.describe()}"
            )
            assert expected in out, (line, out)
    conn = emq_notebook.current()
    row = emq_notebook.jobs.get_job(conn, "mailers", "j_1")
    assert row["payload"] == '{"to": "ana@example.org"}'
    assert emq_notebook.jobs.get_job_logs(conn, "mailers", "j_1") == [
        "payload mended, see --help of the mailer"
    ]
    assert magics.SESSION.settings.default_limit == 50
    table = ip.run_line_magic("emq", "connections")
    assert table.loc["scratch", "env"] == "staging" and table.loc["scratch", "read_only"]
    assert emq_notebook.current("scratch").read_only and not emq_notebook.current().read_only
    assert ip.user_ns["dead"].empty


def test_the_first_payload_keeps_its_dollar_and_braces(ip, session_on):
    ip.user_ns["promo"] = "EXPANDED"
    ip.run_cell("%emq connect")
    line = next(ln for ln in SESSION_BLOCK.splitlines() if ln.startswith("%emq enqueue"))
    ip.run_cell(line)
    import emq_notebook

    assert (
        '"note": "$5 {promo}"'
        in emq_notebook.jobs.get_job(emq_notebook.current(), "mailers", "j_1")["payload"]
    )


def test_the_settings_paragraph_names_each_setting_and_its_default(ip):
    from emq_notebook.magics import EMQMagics

    text = ALL.split("**Settings.**", 1)[1].split("**Named connections.**", 1)[0]
    for name, trait in EMQMagics.class_traits(config=True).items():
        default = trait.default_value
        assert f"`{name}` ({default}" in text or f"`{name}` (`{default}`)" in text, name
    assert ip.run_cell("%config EMQMagics").success


def test_the_completion_examples(ip, conn):
    from emq_notebook import jobs, magics

    text = ALL.split("**Completion.**", 1)[1].split("\n\n", 1)[0]
    assert "`%emq rep` + Tab gives `reprocess` and `repeats`" in text and "`--state d` gives `dead`" in text
    magics.SESSION.conn = conn
    jobs.enqueue(conn, "mailers", "{}", id="j_dead", max_attempts=1)
    jobs.fail(conn, "mailers", jobs.claim(conn, "mailers", 1000)[0], "boom")
    jobs.enqueue(conn, "mailers", "{}", id="j_live")
    assert ip.complete("", "%emq rep", 8)[1] == ["reprocess", "repeats"]
    line = "%emq reprocess mailers "
    assert ip.complete("", line, len(line))[1] == ["j_dead"]
    line = "%emq jobs mailers --state d"
    assert ip.complete("", line, len(line))[1] == ["dead"]


# -- "Rows written by other nodes": what the operator is told to do works as written ------

FOREIGN = section("Rows written by other nodes")


def test_the_foreign_row_section_is_what_happens(ip, conn, capsys):
    import re

    from emq_notebook import decoding, jobs, magics

    magics.SESSION.conn = conn
    jobs.enqueue(conn, "mail", "{}", id="j_1")
    jobs.enqueue(conn, "mail", "{}", id="j_2")
    conn.client.hset("emq:{mail}:job:j_1", "attempts", "three")
    refusal = re.search(r"\(`(refused: claim mail .*?)`\)", FOREIGN).group(1)
    for _ in range(2):  # it blocks: the same answer again
        capsys.readouterr()
        ip.run_line_magic("emq", "claim mail")
        assert capsys.readouterr().out.strip() == refusal
    assert conn.client.zrange("emq:{mail}:pending", 0, -1) == ["j_1", "j_2"]
    mend = re.search(r"`(HSET emq:\{mail\}:job:j_1 attempts 0)`", FOREIGN).group(1).split()
    conn.client.execute_command(*mend)
    assert ip.run_line_magic("emq", "claim mail").id == "j_1"  # mended: served
    conn.client.hset("emq:{mail}:job:j_2", "priority", "1e999")
    jobs.enqueue(conn, "mail", "{}", id="j_3")
    assert "`%emq remove mail j_1`" in FOREIGN
    ip.run_line_magic("emq", "remove mail j_2")  # removed: the next is served
    assert ip.run_line_magic("emq", "claim mail").id == "j_3"
    # the decoding paragraph's example: bytes shown as \xNN, written back as they were
    jobs.enqueue(conn, "mail", "{}", id="j_4")
    conn.client.execute_command("HSET", "emq:{mail}:job:j_4", "payload", b"\xff")
    text = jobs.get_job(conn, "mail", "j_4")["payload"]
    assert "`\\xNN`" in FOREIGN and decoding.printable(text) == "\\xff"
    jobs.update_data(conn, "mail", "j_4", text)
    assert (
        conn.client.connection_pool.get_encoder().encode(jobs.get_job(conn, "mail", "j_4")["payload"])
        == b"\xff"
    )


# -- "Using a runbook in an incident", run as written on a real Valkey ------------------------

INCIDENT = section("Using a runbook in an incident")


def runaway(valkey, n=10_050):
    """A backlog above the runbook's default BACKLOG_ABOVE (10,000), one job in flight."""
    import emq_notebook as emq

    url = f"redis://127.0.0.1:{valkey.port}/0"
    conn = emq.connect(url)
    conn.client.flushall()
    emq.jobs.enqueue(conn, "newsletters", '{"early": true}', id="j_flight")
    emq.jobs.claim(conn, "newsletters", 600_000)
    for i in range(n):
        emq.jobs.enqueue(conn, "newsletters", f'{{"copy": {i}}}')
    return url, conn


def test_the_papermill_line_runs_as_written(valkey, tmp_path):
    """As written, against a server whose user has a password: the password in
    EMQ_PASSWORD, the URL naming the user only; the record never holds the password."""
    import os
    import shlex
    import subprocess
    import sys

    import nbformat
    from test_runbooks_live import said

    password, line = INCIDENT.split("```bash", 1)[1].split("```", 1)[0].strip().splitlines()
    assert password.startswith("export EMQ_PASSWORD=...")
    assert line == (
        "papermill notebooks/runbooks/11-runaway-producer.ipynb out.ipynb -p EMQ_URL redis://... "
        "-p QUEUE newsletters -p APPLY True"
    )
    url, conn = runaway(valkey)
    secret = "pw-runbook-7Zq"
    conn.client.execute_command("ACL", "SETUSER", "oncall", "on", f">{secret}", "~*", "&*", "+@all")
    user_url = url.replace("redis://", "redis://oncall@")
    root = Path(__file__).resolve().parent.parent
    words = [user_url if w == "redis://..." else w for w in shlex.split(line)]
    words[0] = str(Path(sys.executable).parent / "papermill")  # the one installed with the package
    try:  # from the repository root, as written
        done = subprocess.run(
            words,
            cwd=root,
            timeout=300,
            capture_output=True,
            text=True,
            env={**os.environ, "EMQ_PASSWORD": secret},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        stored = (root / "out.ipynb").read_text()
        record = said(nbformat.read(root / "out.ipynb", 4))
    finally:
        (root / "out.ipynb").unlink(missing_ok=True)
        conn.client.execute_command("ACL", "DELUSER", "oncall")
    assert secret not in stored and secret not in done.stdout + done.stderr
    assert f"server: {user_url} · env not set · executor script · APPLY = True: steps write" in record
    assert "step drain: done — drained 10,050 jobs" in record and "outcome reached (3 checks)" in record
    assert emq_backlog(conn) == 0 and conn.client.zrange("emq:{newsletters}:active", 0, -1) == ["j_flight"]


def emq_backlog(conn):
    from emq_notebook import admin

    return admin.backlog(conn, "newsletters")


def test_the_jupyter_way_runs_as_written(valkey):
    import re

    import nbformat
    from keydump import changed, dump
    from nbclient import NotebookClient
    from test_runbooks_live import said

    steps = [
        ln
        for ln in INCIDENT.split("In Jupyter:", 1)[1].split("In automation", 1)[0].splitlines()
        if re.match(r"\d\. ", ln)
    ]
    assert [s.split(".")[0] for s in steps] == ["1", "2", "3", "4", "5", "6"]
    url, conn = runaway(valkey)
    root = Path(__file__).resolve().parent.parent
    path = re.search(r"`(notebooks/runbooks/[^`]+\.ipynb)`", steps[0]).group(1)
    nb = nbformat.read(root / path, 4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    runs = []
    for step in steps:
        for assignment in re.findall(r"`([A-Z_]+ = [^`]+)`", step):  # set a parameter, as a person would
            name = assignment.split(" = ")[0]
            assignment = assignment.replace('"redis://..."', repr(url))
            lines = params.source.splitlines()
            at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{name} = "))
            lines[at] = assignment
            params.source = "\n".join(lines)
        if "Run all" in step:
            before = dump(conn.client)
            NotebookClient(
                nb,
                timeout=300,
                kernel_name="python3",
                resources={"metadata": {"path": str(root / "notebooks" / "runbooks")}},
            ).execute()
            runs.append((said(nb), changed(before, dump(conn.client))))
        if step.startswith("4."):  # read the previews
            text, diff = runs[-1]
            assert diff == [] and f"server: {url} · env production · executor script" in text
            assert "step drain: drain 10,050 jobs from newsletters" in text
            assert "APPLY = False: previewed only, nothing written" in text
    text, diff = runs[-1]
    assert len(runs) == 2 and "step drain: done — drained 10,050 jobs" in text and "step resume: done" in text
    assert emq_backlog(conn) == 0 and "-emq:{newsletters}:pending" in diff


# -- "Health", executed as written, line by line, on both backends ----------------------

HEALTH_BLOCK = block("Health")


def test_the_health_block_runs_as_written(ip, session_on, capfd):
    from emq_notebook.widgets.base import close_all

    lines: list[str] = []
    for ln in HEALTH_BLOCK.strip().splitlines():
        if ln.startswith(" ") and lines:  # a loop's body runs with its head
            lines[-1] += "\n" + ln
        elif ln.strip():
            lines.append(ln)
    try:
        for line in lines:
            result, out, comment = typed(ip, capfd, line)
            assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
            if comment.startswith("-> "):  # the line's value, as written
                assert repr(result.result) == comment[3:], (line, result.result)
            if comment.startswith("prints "):  # the line's printed answer
                assert comment[len("prints ") :] in out, (line, out)
        ns = ip.user_ns
        assert list(ns["lat"].columns) == [
            "wait_p50",
            "wait_p95",
            "wait_p99",
            "run_p50",
            "run_p95",
            "run_p99",
            "n",
        ]
        assert ns["fig"].axes[0].get_title() == "mailers: jobs per minute, last 1 h"
        assert ns["view"].running and ns["board"].verdicts == {"mailers": "ok"}
    finally:
        close_all()


# -- the Voilà lines, run as written: quietly --------------------------------------------

VOILA_BLOCK = ALL.split("a web page for people who never open Jupyter", 1)[1].split("```bash", 1)[1]
VOILA_BLOCK = VOILA_BLOCK.split("```", 1)[0]


def test_the_voila_lines_run_quietly(valkey, tmp_path):
    """`jupyter trust` then `voila --no-browser ...` as written (a free port added, a
    private HOME): the page is served and the log holds no warning and no traceback."""
    import os
    import shlex
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    import redis

    redis.Redis(port=valkey.port).flushall()
    lines = [ln.split("#", 1)[0].strip() for ln in VOILA_BLOCK.strip().splitlines()]
    trust, serve = lines[1], lines[2]
    assert trust == "jupyter trust notebooks/demos/dashboard.ipynb"
    assert serve.startswith("EMQ_URL=redis://127.0.0.1:6379/0 voila --no-browser ")
    # a tab that died without its unload step leaves no kernel behind (tests/test_browser.py)
    assert "--MappingKernelManager.cull_idle_timeout=300" in serve.split()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "EMQ_URL": f"redis://127.0.0.1:{valkey.port}/0",
    }
    bin_dir = Path(sys.executable).parent  # the ones installed with the package
    root = Path(__file__).resolve().parent.parent
    words = shlex.split(trust)
    done = subprocess.run([str(bin_dir / words[0]), *words[1:]], cwd=root, env=env, timeout=60)
    assert done.returncode == 0
    words = shlex.split(serve)[1:]  # the EMQ_URL assignment is in env, pointed at the test server
    log = tmp_path / "voila.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(bin_dir / words[0]), *words[1:-1], f"--port={port}", words[-1]],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=90) as page:
                assert page.status == 200 and page.read()
        finally:
            stop(proc)
    said = log.read_text()
    assert "Kernel started" in said
    assert "Culling kernels with idle durations > 300 seconds at 60 second intervals" in said
    assert "WARNING" not in said and "Traceback" not in said, said


# -- The README's "Triage" section, executed as written, statement by statement in IPython, on both
# backends: a comment after a statement is its answer (a printed line, or the repr of the value the
# statement returns), and is checked; no statement fails ("Run all" goes to the end).
BLOCK = block("Triage")
# a comment starting like one of these is a printed line; one starting like a repr is a value
PRINTED = ("dry run", "remove outbox:", "reprocess outbox halted")
VALUES = ("{", "'", "3", "2")


@pytest.fixture
def magic_on(conn, monkeypatch, ip):
    default_server(conn, monkeypatch)
    magics.SESSION.connections.clear()
    magics.SESSION.current = None
    yield conn
    magics.SESSION.connections.clear()
    magics.SESSION.current = None


def test_the_triage_section_runs_as_written(ip, magic_on, capfd):
    demo.fresh(magic_on, "outbox")
    lines = statements(BLOCK)
    assert len(lines) >= 15
    checked = 0
    for line in lines:
        result, out, comment = typed(ip, capfd, line)
        # the halted retry too: caught and printed, as an operator shows it (#41.5)
        assert result.error_before_exec is None and result.error_in_exec is None, (line, out)
        if comment.startswith(PRINTED):
            assert comment in out, (line, out)
            checked += 1
        elif comment.startswith(VALUES):
            assert repr(result.result) == comment, (line, result.result)
            checked += 1
    assert checked >= 7
    conn = emq_notebook.current()
    assert magic_on.label == conn.label
    dead = ip.user_ns["dead"]
    assert list(dead.index) == ["j_2", "j_3"] and set(dead["state"]) == {"dead"}
    assert emq_notebook.frames.counts(conn, ["outbox"]).loc["outbox", "dead"] == 0
    assert not conn.client.exists("emq:{outbox}:job:j_2")


def test_the_errors_line_answers_what_its_comment_says(ip, magic_on):
    demo.fresh(magic_on, "outbox")
    for line in BLOCK.strip().splitlines():
        if line.startswith("%emq errors"):
            break
        ip.run_cell(line)
    frame = ip.run_cell(line).result
    assert list(frame.index) == ["ValueError: SMTP <num>: bad recipient <str>"]
    assert frame["count"].tolist() == [2]
    assert "one signature: ValueError: SMTP <num>: bad recipient <str>, count 2" in line
