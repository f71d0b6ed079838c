"""The panels as a saved notebook, a long-running kernel and a careful operator see
them: a static fallback in the display bundle, one background thread per panel,
confirmations that re-count, read-only connections, labelled headers."""

import html
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import dump, failed, lost_server, until

import emq_notebook as emq
from emq_notebook import admin, connector, jobs
from emq_notebook.errors import BadInput
from emq_notebook.widgets import (
    ClaimGate,
    DeadLetterPanel,
    EventsView,
    JobPanel,
    OperatorConsole,
    QueuePanel,
)

Q = "mail"
VIEW = "application/vnd.jupyter.widget-view+json"
CHANNEL = f"emq:{{{Q}}}:events"


# -- the static fallback --------------------------------------------------------------
def shown(ip, panel):
    data, _ = ip.display_formatter.format(panel)
    return data


def test_queue_panel_bundle_keeps_the_view_and_shows_the_counts(conn, ip):
    failed(conn, Q, 2)
    for i in range(3):
        jobs.enqueue(conn, Q, str(i))
    panel = QueuePanel(conn, Q)
    data = shown(ip, panel)
    model_id = panel.model_id
    assert data[VIEW]["model_id"] == model_id
    assert "<td>pending</td><td>3</td>" in data["text/html"]
    assert "<td>dead</td><td>2</td>" in data["text/html"]
    text = data["text/plain"]
    assert text.startswith("QueuePanel(mail) · env not set · connected: ")
    assert "pending | 3" in text and "dead | 2" in text and "state: running" in text
    # stable across panels and runs: no model id, no address, no time in the text
    again = shown(ip, QueuePanel(conn, Q))
    assert (again["text/plain"], again["text/html"]) == (text, data["text/html"])
    assert model_id not in text + data["text/html"] and "0x" not in text
    assert panel.comm is None  # the rebuilt panel replaced (closed) it


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


def test_events_view_fallback_shows_the_last_events(conn, ip):
    view = EventsView(conn, Q)
    jid = jobs.enqueue(conn, Q, "x", id="j_shown")
    jobs.update_progress(conn, Q, jid, "40")
    assert until(lambda: view.seen == 2)
    data = shown(ip, view)
    view.close()
    assert "events seen: 2" in data["text/plain"]
    assert "progress  job j_shown" in data["text/plain"] and "j_shown" in data["text/html"]


# -- threads ------------------------------------------------------------------------------
@pytest.mark.parametrize("every", [0, 0.01, 0.49, -1, float("nan"), True, "2", None])
def test_refresh_interval_is_validated(conn, every):
    before = dump(conn)
    with pytest.raises(BadInput, match="refresh interval"):
        QueuePanel(conn, Q, refresh_every=every)
    assert dump(conn) == before


def emq_threads():
    return {t for t in threading.enumerate() if t.name.startswith("emq-")}


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


def test_auto_refresh_is_one_thread_per_panel(conn):
    panel = QueuePanel(conn, Q, refresh_every=0.5, auto=True)
    for on in (False, True, False, True, True):
        panel.auto.value = on
    assert len([t for t in emq_threads() if t.name == f"emq-refresh-{Q}"]) == 1
    panel.close()
    assert not emq_threads()


def subscribers(conn, backend):
    """Subscribers of the queue's channel (PUBSUB NUMSUB), and on a real server the
    clients in subscribe mode (CLIENT LIST)."""
    numsub = dict(conn.client.pubsub_numsub(CHANNEL))[CHANNEL]
    if backend != "valkey":
        return numsub, numsub
    return numsub, sum(1 for c in conn.client.client_list() if c.get("sub") not in (None, "0"))


def test_rebuilding_an_events_view_leaves_one_subscription(conn, backend):
    before = set(threading.enumerate())
    views = [EventsView(conn, Q) for _ in range(10)]
    view = views[-1]
    assert all(v.status_text == "stopped after 0 events" and not v.running for v in views[:-1])
    assert until(lambda: subscribers(conn, backend) == (1, 1)), subscribers(conn, backend)
    assert len(set(threading.enumerate()) - before) <= 1
    jobs.enqueue(conn, Q, "x")
    assert until(lambda: view.seen == 1)
    view.close()
    assert until(lambda: subscribers(conn, backend) == (0, 0)), subscribers(conn, backend)
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


def test_events_view_says_when_its_thread_dies(conn, backend):
    view = EventsView(conn, Q)
    assert view.running and view.status_text == f"listening on {CHANNEL}"
    server = connector.fake_server() if backend == "fake" else None
    if server is not None:
        server.connected = False
    else:
        conn.client.client_kill_filter(_type="pubsub")
    try:
        assert until(lambda: not view.running)
    finally:
        if server is not None:
            server.connected = True
    assert view.status_text.startswith("stopped by an error after 0 events: WireError: lost the server at ")
    assert "listening" not in view.status.value and view.stop_button.description == "Start"
    view.stop_button.click()  # Start again
    assert view.running and view.status_text == f"listening on {CHANNEL}"
    jobs.enqueue(conn, Q, "x")
    assert until(lambda: view.seen == 1)
    view.close()


# -- confirm what you show ------------------------------------------------------------------
def test_drain_asks_first_recounts_at_confirm_and_asks_again(conn):
    for i in range(3):
        jobs.enqueue(conn, Q, str(i))
    panel = QueuePanel(conn, Q)
    panel.drain_button.click()
    assert "Drain <b>3</b> pending jobs" in panel.confirm_text.value
    panel.cancel_button.click()
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 3  # nothing drained
    panel.drain_button.click()
    for i in range(497):
        jobs.enqueue(conn, Q, f"late {i}")
    before = dump(conn)
    panel.confirm_drain_button.click()
    assert dump(conn) == before  # 500 were never shown
    assert "The backlog changed (the confirmation said 3). Drain <b>500</b>" in panel.confirm_text.value
    assert panel.status_text == "not drained: 500 jobs wait now; confirm again"
    assert panel.confirm_row.layout.display == "flex"
    panel.confirm_drain_button.click()
    assert panel.status_text == "drained 500 jobs from mail"
    assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 0


def test_drain_of_fewer_than_shown_goes_ahead(conn):
    for i in range(3):
        jobs.enqueue(conn, Q, str(i))
    panel = QueuePanel(conn, Q)
    panel.drain_button.click()
    jobs.claim(conn, Q, 60_000)  # a worker took one meanwhile
    panel.confirm_drain_button.click()
    assert panel.status_text == "drained 2 jobs from mail"
    assert conn.client.zcard(f"emq:{{{Q}}}:active") == 1


def test_drain_asks_again_when_the_schedule_choice_changed(conn):
    jobs.enqueue(conn, Q, "now")
    jobs.enqueue(conn, Q, "later", delay_ms=3_600_000)
    panel = QueuePanel(conn, Q)
    panel.drain_button.click()
    assert "Drain <b>1</b> pending jobs" in panel.confirm_text.value
    panel.include_schedule.value = True
    before = dump(conn)
    panel.confirm_drain_button.click()
    assert dump(conn) == before
    assert "Drain <b>2</b> pending and scheduled jobs" in panel.confirm_text.value
    panel.confirm_drain_button.click()
    assert panel.status_text == "drained 2 jobs from mail"


def test_obliterate_states_its_count_and_recounts(conn):
    for i in range(5):
        jobs.enqueue(conn, Q, str(i))
    panel = QueuePanel(conn, Q)
    panel.pause_button.click()
    panel.typed_name.value = Q
    assert "Obliterate <b>mail</b>: <b>5</b> jobs" in panel.obliterate_text.value
    for i in range(3):
        jobs.enqueue(conn, Q, f"late {i}")
    before = dump(conn)
    panel.obliterate_button.click()
    assert dump(conn) == before
    assert (
        "The queue changed (the line said 5). Obliterate <b>mail</b>: <b>8</b> jobs"
        in panel.obliterate_text.value
    )
    assert panel.status_text == "not obliterated: 8 jobs now; click Obliterate again"
    panel.obliterate_button.click()
    assert panel.status_text == "obliterated mail: 8 jobs in 1 calls"
    assert admin.job_count(conn, Q) == 0


# -- read-only connections and labelled headers -----------------------------------------------
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


# -- bytes that are not UTF-8 -------------------------------------------------------------------
def unsendable(widget):
    """Synced text traits holding a lone surrogate (they would fail to reach the browser)."""
    texts = {k: getattr(widget, k) for k in widget.keys if isinstance(getattr(widget, k), str)}
    found = [
        (type(widget).__name__, k) for k, v in texts.items() if any("\udc80" <= c <= "\udcff" for c in v)
    ]
    for child in getattr(widget, "children", ()):
        found += unsendable(child)
    return found


def test_undecodable_bytes_show_as_escapes_and_stay_bytes(conn, ip):
    jid = failed(conn, Q, 1)[0]
    key = f"emq:{{{Q}}}:job:{jid}"
    conn.client.execute_command("HSET", key, "payload", b'{"to": "\xff"}', "last_error", b"bad \xfe byte")
    conn.client.execute_command("RPUSH", key + ":logs", b"log \xfd line")
    panel = JobPanel(conn, Q, jid)
    assert panel.payload.value == '{"to": "\\xff"}'
    assert "bad \\xfe byte" in panel.row_view.value and "log \\xfd line" in panel.logs_view.value
    data = shown(ip, panel)
    assert "bad \\xfe byte" in data["text/html"] and "log \\xfd line" in data["text/plain"]
    assert unsendable(panel) == [] and "\udcff" not in data["text/html"] + data["text/plain"]
    # the editor shows the bytes' picture: Update with it unedited writes nothing
    before = dump(conn)
    panel.update_button.click()
    assert panel.status_text.startswith("payload unchanged") and dump(conn) == before
    raw = conn.client.connection_pool.get_encoder()
    assert raw.encode(jobs.get_job(conn, Q, jid)["payload"]) == b'{"to": "\xff"}'
    queue_panel = QueuePanel(conn, Q)
    assert "dead | 1" in shown(ip, queue_panel)["text/plain"] and unsendable(queue_panel) == []


def test_a_dead_letter_with_undecodable_bytes_is_listed_as_escapes(conn, ip):
    jid = failed(conn, Q, 1)[0]
    conn.client.execute_command("HSET", f"emq:{{{Q}}}:job:{jid}", "last_error", b"bad \xfe byte")
    panel = DeadLetterPanel(conn, Q)
    assert panel.select._options_labels == (f"{jid} — bad \\xfe byte (failures 1)",)
    assert "bad \\xfe byte" in shown(ip, panel)["text/plain"] and unsendable(panel) == []


def test_the_dead_letter_summary_counts_the_whole_set_not_the_page(conn, ip):
    failed(conn, Q, 3, error="SMTP 550")
    failed(conn, Q, 2, error="timeout")
    panel = DeadLetterPanel(conn, Q, page=2)
    assert len(panel.select.options) == 2
    text = shown(ip, panel)["text/plain"]
    assert "5 dead (2 listed below, newest death first)" in text
    assert "SMTP <num> | 3" in text and "timeout | 2" in text


def test_an_undecodable_event_is_shown_and_the_tail_goes_on(conn, ip):
    view = EventsView(conn, Q)
    conn.client.execute_command("PUBLISH", CHANNEL, b'{"event": "progress", "data": "\xff"}')
    assert until(lambda: view.seen == 1)
    jobs.enqueue(conn, Q, "x")
    assert until(lambda: view.seen == 2)
    assert view.running and view.status_text == f"listening on {CHANNEL}"
    assert "progress  data \\xff" in html.unescape(view.lines.value) and unsendable(view) == []
    assert "progress  data \\xff" in shown(ip, view)["text/plain"]
    view.close()


def test_a_refresh_thread_that_loses_the_server_says_so_and_prints_nothing(backend, capfd):
    # a real fault on each client
    with lost_server(backend) as conn:
        panel = QueuePanel(conn, "lost", refresh_every=0.5, auto=True)
        assert panel.status_text.startswith("error: lost the server at ")
        ticks = panel.status.value
        panel.say("")
        assert until(lambda: panel.status_text.startswith("error: lost the server at "))
        assert panel.status.value == ticks and panel.auto.value  # it keeps trying, quietly
    panel.close()
    assert not emq_threads()
    assert capfd.readouterr() == ("", "")


def test_a_refresh_that_meets_a_foreign_key_says_so_and_prints_nothing(conn, capfd):
    panel = QueuePanel(conn, Q, refresh_every=0.5, auto=True)
    conn.client.set(f"emq:{{{Q}}}:pending", "not a sorted set")  # written by someone else
    # counted as empty and said beside the counts (frames.counts: one bad key never
    # blinds a look)
    said = f"emq:{{{Q}}}:pending holds another type: counted as empty"
    assert until(lambda: said in panel.counts.value)
    panel.refresh_button.click()  # a click: the same line
    assert said in panel.counts.value and panel.auto.value
    conn.client.delete(f"emq:{{{Q}}}:pending")
    jobs.enqueue(conn, Q, "x")
    assert until(lambda: panel.snapshot["pending"] == 1)  # the next tick reads again
    panel.close()
    assert not emq_threads()
    assert capfd.readouterr() == ("", "")


def test_the_job_panel_shows_numbers_another_node_wrote_as_text(conn, ip):
    """A counter or a time that is no ASCII whole number ("²²²²", 5,000 digits, a time of
    400 digits) shows as the text it is, as `%emq job` shows it; the panel builds."""
    jid = jobs.enqueue(conn, Q, "{}")
    key = f"emq:{{{Q}}}:job:{jid}"
    odd = {"attempts": "²²²²", "failures": "1" * 5_000, "created_at": "9" * 400, "due_at": "٣٤٥٦٧"}
    conn.client.hset(key, mapping=odd)
    panel = JobPanel(conn, Q, jid)
    for value in odd.values():
        assert html.escape(value) in panel.row_view.value
    assert "Exceeds the limit" not in panel.status_text
    assert "1" * 5_000 in shown(ip, panel)["text/html"]
    # a whole number and a time a node writes still read as an operator reads them
    conn.client.hset(key, mapping={"attempts": "12345", "created_at": "1700000000000"})
    panel = JobPanel(conn, Q, jid)
    assert "12,345" in panel.row_view.value and "(1700000000000)" in panel.row_view.value


# -- the detail pane: hostile rows whole, a job gone since the page ----------------------
def test_the_detail_pane_shows_hostile_rows_whole_and_escaped(conn, ip):
    """Bytes that are not UTF-8 as `\\xNN`, markup in an error as text (never markup), a
    1 MiB error every character of it; nothing the comm cannot send."""
    from emq_notebook.widgets.job_grid import JobsView

    raw, big = failed(conn, Q, 2)
    key = f"emq:{{{Q}}}:job:"
    markup = b"<script>alert(1)</script><b>x\xfe</b>"
    conn.client.execute_command("HSET", key + raw, "payload", b'{"to": "\xff"}', "last_error", markup)
    huge = "<i>" + "E" * (1 << 20) + "</i>"
    conn.client.execute_command("HSET", key + big, "last_error", huge)
    view = JobsView(conn, Q, state="dead")
    try:
        assert view.open_detail(raw) is not None
        body = view.detail.body.value
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x\\xfe&lt;/b&gt;" in body
        assert "<script>" not in body and "<b>x" not in body
        assert html.escape('"to": "\\xff"') in body  # the payload's JSON, indented
        assert unsendable(view) == []
        assert view.open_detail(big) is not None
        assert html.escape(huge) in view.detail.body.value  # whole, escaped
        assert f"{len(huge):,} characters" in view.detail.body.value
        panel = DeadLetterPanel(conn, Q)  # its list: an entry's error on one line, clipped
        label = next(label for label, i in panel.select.options if i == big)
        assert len(label) < 300 and label.endswith("… (failures 1)")
        panel.select.value = (big,)  # the pane below shows it whole
        assert html.escape(huge) in panel.detail.body.value and unsendable(panel) == []
        panel.close()
    finally:
        view.close()


def test_a_job_gone_between_the_page_and_the_click_is_said_gone(conn, ip):
    """The page was read; another operator removed a job before its row was clicked: the
    detail pane says it is gone (no stale row, no error), and the next click works."""
    from emq_notebook.widgets.job_grid import JobsView

    gone, kept = failed(conn, Q, 2)
    view = JobsView(conn, Q, state="dead")
    panel = DeadLetterPanel(conn, Q)
    try:
        assert gone in view.frame.index and gone in [v for _, v in panel.select.options]
        jobs.remove_job(conn, Q, gone)
        assert view.open_detail(gone) is None
        assert "gone: no such job now" in view.detail.body.value and view.detail.row is None
        panel.select.value = (gone,)  # picked in the Dead letters list, read before the removal
        assert panel.detail.job_id == gone and "gone: no such job now" in panel.detail.body.value
        panel.select.value = (gone, kept)
        assert panel.detail.job_id == kept and panel.detail.row["state"] == "dead"
        assert view.open_detail(kept) is not None and "gone" not in view.detail.body.value
        view.refresh()  # the page read again: the gone job is no longer listed
        assert list(view.frame.index) == [kept]
    finally:
        view.close()
        panel.close()
