"""What every panel shares (emq_notebook/widgets/base.py), as a saved notebook, a
long-running kernel and a careful operator see it, on both backends: a static fallback in
the display bundle, the refresh interval checked, one background thread per panel and
none left at interpreter exit, a header naming the connection and its env, writing
buttons greyed out on a read-only connection and each greyed-out button saying why, the
reason typed in a panel recorded as its writes' audit reason."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import dump, failed, until
from panels import VIEW, emq_threads, shown

import emq_notebook as emq
from emq_notebook import audit, jobs
from emq_notebook.errors import BadInput
from emq_notebook.widgets import ClaimGate, DeadLetterPanel, EventsView, JobPanel, OperatorConsole, QueuePanel

Q = "mail"
CHANNEL = f"emq:{{{Q}}}:events"


def test_every_panel_has_a_static_fallback(conn, ip):
    ids = failed(conn, Q, 2, error="SMTP 550") + failed(conn, Q, 1, error="timeout")
    jobs.add_log(conn, Q, ids[0], "retried by hand")
    panels = {
        JobPanel(conn, Q, ids[0]): [
            "state | dead",
            "last_error | SMTP 550",
            "retried by hand",
            'payload: {"n": 0}',
        ],
        DeadLetterPanel(conn, Q): ["3 dead", "SMTP <num> | 2", "timeout | 1"],
        ClaimGate(conn, "gate"): ["state: running", "pending: 0"],
        OperatorConsole(conn, "console"): ["verb: pause", "precondition"],
        EventsView(conn, Q): ["events seen: 0", f"listening on {CHANNEL}"],
    }
    try:
        for panel, facts in panels.items():
            data = shown(ip, panel)
            assert VIEW in data, panel
            head = f"{panel!r} · env not set · connected: {conn.label}"
            assert data["text/plain"].startswith(head), data["text/plain"]
            for fact in facts:
                assert fact.lower() in data["text/plain"].lower(), (panel, fact, data["text/plain"])
            assert "<table" in data["text/html"] or "<pre>" in data["text/html"], panel
    finally:
        for panel in panels:
            panel.close()


@pytest.mark.parametrize("every", [0, 0.01, 0.49, -1, float("nan"), True, "2", None])
def test_refresh_interval_is_validated(conn, every):
    before = dump(conn)
    with pytest.raises(BadInput, match="refresh interval"):
        QueuePanel(conn, Q, refresh_every=every)
    assert dump(conn) == before


def test_rebuilding_a_refreshing_panel_leaves_one_thread(conn):
    before = set(threading.enumerate())
    for _ in range(10):
        panel = QueuePanel(conn, Q, refresh_every=0.5)
        panel.auto.value = True
    extra = set(threading.enumerate()) - before
    assert len(extra) <= 1 and all(t.is_alive() for t in extra)
    jobs.enqueue(conn, Q, "x")
    assert until(lambda: panel.snapshot["pending"] == 1)  # the last one still refreshes
    panel.close()
    assert set(threading.enumerate()) - before == set()


def test_a_panel_for_another_queue_is_not_replaced(conn):
    first, second = EventsView(conn, Q), EventsView(conn, "other")
    try:
        assert first.running and second.running
    finally:
        first.close()
        second.close()
    assert not first.running and not emq_threads()


EXIT_SCRIPT = """
import atexit, threading
import emq_notebook as emq
# registered first, so it runs last: after the panels' own exit hook
atexit.register(lambda: print("left:", sorted(t.name for t in threading.enumerate()
                                              if t.name.startswith("emq-"))))
conn = emq.connect({url})
emq.widgets.QueuePanel(conn, "exit", refresh_every=0.5, auto=True)
emq.widgets.EventsView(conn, "exit")
print("running:", sorted(t.name for t in threading.enumerate() if t.name.startswith("emq-")))
"""


@pytest.fixture(scope="module")
def exits(valkey):
    """One interpreter per backend, both started at once (each takes seconds to import
    the package): it opens a refreshing panel and an events view, then exits."""
    urls = {"fake": "None", "valkey": repr(f"redis://127.0.0.1:{valkey.port}/0")}
    started = {
        b: subprocess.Popen(
            [sys.executable, "-c", EXIT_SCRIPT.format(url=url)],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
        )
        for b, url in urls.items()
    }
    yield started
    for proc in started.values():
        proc.kill()  # only one still running (a failed test) is signalled


def test_panel_threads_stop_at_interpreter_exit(backend, exits):
    proc = exits[backend]
    stdout, stderr = proc.communicate(timeout=60)
    out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert out.returncode == 0, out.stderr
    assert "running: ['emq-events-exit', 'emq-refresh-exit']" in out.stdout
    assert "left: []" in out.stdout, out.stdout
    assert "Traceback" not in out.stderr


@pytest.fixture
def labelled(backend, conn, request):
    """Another session on the same (flushed) server, labelled `env`, read-only when asked."""
    url = None if backend == "fake" else f"redis://127.0.0.1:{request.getfixturevalue('valkey').port}/0"

    def make(read_only=False, env=None):
        return emq.connect(url, embedded="fake" if url is None else None, read_only=read_only, env=env)

    return make


def test_every_header_names_the_connection_and_env(conn, ip, labelled):
    prod = labelled(env="production")
    jid = jobs.enqueue(conn, Q, "{}")
    panels = [
        QueuePanel(prod, Q),
        JobPanel(prod, Q, jid),
        EventsView(prod, Q),
        ClaimGate(prod, Q),
        OperatorConsole(prod),
        DeadLetterPanel(prod, Q),
    ]
    try:
        for panel in panels:
            head = panel.children[0]
            assert head is panel.heading, panel
            assert "production</span>" in head.value and "#cf222e" in head.value, panel
            assert f"connected: {conn.label}" in head.value, panel
            assert shown(ip, panel)["text/plain"].startswith(
                f"{panel!r} · env production · connected: {conn.label}"
            )
    finally:
        for panel in panels:
            panel.close()
    staging = QueuePanel(labelled(env="staging"), Q)
    assert "staging</span>" in staging.heading.value and "#cf222e" not in staging.heading.value
    staging.drain_button.click()
    assert "env staging · connected: " in staging.confirm_text.value


WRITING = {
    QueuePanel: ["pause_button", "drain_button", "confirm_drain_button", "obliterate_button"],
    JobPanel: ["update_button", "progress_button", "log_button", "remove_button", "reprocess_button"],
    ClaimGate: ["gate", "claim_button", "add_button"],
    OperatorConsole: ["try_button"],
}


def test_read_only_greys_out_writing_buttons_and_sends_nothing(conn, labelled):
    jid = failed(conn, Q, 1)[0]
    jobs.enqueue(conn, Q, "{}")
    ro = labelled(read_only=True, env="production")
    panels = {
        QueuePanel: QueuePanel(ro, Q),
        JobPanel: JobPanel(ro, Q, jid),
        ClaimGate: ClaimGate(ro, Q),
        OperatorConsole: OperatorConsole(ro),
    }
    queue_panel = panels[QueuePanel]
    queue_panel.typed_name.value = Q
    panels[JobPanel].payload.value = '{"edited": true}'
    before = dump(conn)
    for kind, names in WRITING.items():
        panel = panels[kind]
        assert "read-only" in panel.heading.value
        for name in names:
            button = getattr(panel, name)
            assert button.disabled, (kind.__name__, name)
            panel.say("")
            if name == "gate":
                button.value = not button.value
            else:
                button.click()  # a handler called anyway
            assert panel.status_text.startswith("ReadOnly: "), (kind.__name__, name, panel.status_text)
            assert "read-only session" in panel.status_text and "(production)" in panel.status_text
    # the refresh and the reads still work
    queue_panel.refresh_button.click()
    assert queue_panel.snapshot["pending"] == 1 and queue_panel.snapshot["dead"] == 1
    assert not queue_panel.refresh_button.disabled and not queue_panel.auto.disabled
    assert panels[ClaimGate].gate.value is False  # the toggle follows the queue
    assert dump(conn) == before
    for panel in panels.values():
        panel.close()


# -- why a greyed-out button is off, the reason typed is the audit entry's


def test_a_greyed_out_button_says_why(conn, connect_as):
    for i in range(3):
        jobs.enqueue(conn, Q, str(i))
    panel = QueuePanel(conn, Q)
    assert panel.obliterate_button.tooltip == "pause the queue first"
    assert "Obliterate: pause the queue first" in panel.why_off.value
    assert panel.why_off in panel.children
    panel.pause_button.click()
    assert panel.obliterate_button.tooltip == "type the queue name to confirm"
    panel.typed_name.value = Q
    assert not panel.obliterate_button.disabled and not panel.obliterate_button.tooltip
    assert panel.obliterate_button.description == "Obliterate 3 jobs"  # the count it states
    assert "Obliterate" not in panel.why_off.value
    job = JobPanel(conn, Q, jobs.enqueue(conn, Q, "{}"))
    assert job.reprocess_button.tooltip == "only a dead job is reprocessed (this one is pending)"
    assert "Reprocess: only a dead job is reprocessed" in job.why_off.value
    letters = DeadLetterPanel(conn, Q)
    assert letters.reprocess_preview_button.tooltip == "nothing previewed (Preview first)"
    assert letters.reprocess_all_button.tooltip == "no dead jobs in mail"
    session = connect_as()
    session.read_only = True
    ro = QueuePanel(session, Q)
    assert ro.pause_button.tooltip == "read-only connection"
    assert "read-only connection: every writing button is greyed out" in ro.why_off.value


def test_a_reason_typed_in_a_panel_is_the_audit_entrys_reason(conn):
    ids = failed(conn, Q, 3)
    queue = QueuePanel(conn, Q)
    assert queue.reason in queue.children
    queue.reason.value = "INC-42: bounce storm"
    queue.pause_button.click()
    letters = DeadLetterPanel(conn, Q)
    letters.reason.value = "  the mailbox is back  "
    letters.select.value = (ids[0],)
    letters.reprocess_button.click()
    job = JobPanel(conn, Q, ids[1])
    job.reason.value = "a poison payload"
    job.remove_button.click()
    untyped = QueuePanel(conn, Q)
    untyped.pause_button.click()  # resumes: no reason typed, none recorded
    trail = audit.read(conn, Q)
    assert list(zip(trail["verb"], trail["reason"], trail["surface"], strict=True)) == [
        ("resume", "", "panel"),
        ("remove", "a poison payload", "panel"),
        ("reprocess", "the mailbox is back", "panel"),
        ("pause", "INC-42: bounce storm", "panel"),
    ]
