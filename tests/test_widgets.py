"""The panels driven in Python: clicks change the real keyspace, refusals do not."""

import time

from helpers import dump, failed, keys_of

from emq_notebook import admin, audit, jobs
from emq_notebook.widgets import DeadLetterPanel, EventsView, JobPanel, QueuePanel
from emq_notebook.widgets.base import plain

Q = "mail"


def test_queue_panel_pause_toggle(conn):
    jobs.enqueue(conn, Q, "x")
    panel = QueuePanel(conn, Q)
    assert repr(panel) == "QueuePanel(mail)" and panel.snapshot["pending"] == 1
    assert panel.pause_button.description == "Pause"
    panel.pause_button.click()
    assert conn.client.hget(f"emq:{{{Q}}}:meta", "paused") == "1"
    assert panel.pause_button.description == "Resume"
    panel.pause_button.click()
    assert not conn.client.hexists(f"emq:{{{Q}}}:meta", "paused")


def test_queue_panel_obliterate_is_gated_and_bounded(conn):
    for i in range(25):
        jobs.enqueue(conn, Q, str(i))
    jobs.claim(conn, Q, 60_000)
    panel = QueuePanel(conn, Q)
    assert panel.obliterate_button.disabled  # running
    panel.pause_button.click()
    assert panel.obliterate_button.disabled  # name not typed
    panel.typed_name.value = "mai"
    assert panel.obliterate_button.disabled
    panel.typed_name.value = "mail"
    assert not panel.obliterate_button.disabled
    panel.budget.value = 10
    before = dump(conn)
    panel.obliterate_button.click()  # a job in flight, unforced
    assert panel.status_text == "refused: obliterate mail — active"
    assert dump(conn) == before
    panel.force.value = True
    panel.obliterate_button.click()
    assert panel.status_text == "obliterated mail: 25 jobs in 3 calls"
    assert panel.progress.bar.value == panel.progress.bar.max == 25
    assert "obliterated mail: 25 jobs in 3 calls" in panel.progress.label.value
    assert keys_of(conn, Q) == []


# -- what the panels say: a gone queue, why a button is off, the counts, the reason -----------


def test_a_queue_obliterated_elsewhere_is_said_gone_and_its_buttons_are_off(conn, connect_as):
    jobs.enqueue(conn, Q, "x")
    panel = QueuePanel(conn, Q)
    assert "running" in panel.counts.value and not panel.pause_button.disabled
    other = connect_as()  # another client
    admin.pause(other, Q)
    admin.obliterate_all(other, Q)
    panel.refresh_button.click()
    assert panel.gone and "queue mail is gone" in panel.counts.value
    assert "running" not in panel.counts.value and "paused" not in panel.counts.value
    assert ("state", "gone") in panel.facts() and "queue mail is gone" in panel.static_text()
    for button in (panel.pause_button, panel.drain_button, panel.obliterate_button):
        assert button.disabled and button.tooltip == "queue mail is gone", button.description
    assert "Pause, Drain…, Obliterate: queue mail is gone" in panel.why_off.value
    before = dump(conn)
    panel.pause_button.click()  # a click that reached the kernel anyway writes nothing
    assert panel.status_text == "not done: queue mail is gone: no key of it is on the server"
    assert dump(conn) == before == {}
    jobs.enqueue(other, Q, "y")  # the queue made again elsewhere: the panel follows
    panel.refresh_button.click()
    assert not panel.gone and not panel.pause_button.disabled and "running" in panel.counts.value
    assert panel.why_off.value.count("Obliterate: pause the queue first") == 1


def test_a_queue_this_panel_obliterates_is_gone_after(conn):
    jobs.enqueue(conn, Q, "x")
    panel = QueuePanel(conn, Q)
    panel.pause_button.click()
    panel.typed_name.value = Q
    panel.obliterate_button.click()
    assert panel.gone and "queue mail is gone" in panel.counts.value
    assert panel.pause_button.disabled and panel.pause_button.description == "Pause"


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


def test_bulk_buttons_restate_their_count_and_the_bar_says_what_it_did(conn):
    ids = failed(conn, Q, 4)
    panel = DeadLetterPanel(conn, Q, confirm_above=100)
    assert panel.reprocess_all_button.description == "Reprocess all 4…"
    panel.preview_button.click()
    assert panel.reprocess_preview_button.description == "Reprocess 4 previewed"
    assert panel.remove_preview_button.description == "Remove 4 previewed…"
    panel.select.value = tuple(ids[:2])
    assert panel.reprocess_button.description == "Reprocess 2 selected"
    assert panel.remove_button.description == "Remove 2 selected…"
    said: list[str] = []
    panel.progress.label.observe(lambda change: said.append(plain(change["new"])), names="value")
    panel.reprocess_preview_button.click()
    assert said[0] == "reprocessing 4: 0 done" and "reprocessing 4: 4 done" in said
    assert said[-1] == panel.status_text == "reprocess previewed: 4 reprocessed"
    assert panel.progress.view.layout.display == "flex"
    assert panel.progress.bar.value == panel.progress.bar.max == 4
    assert panel.reprocess_preview_button.description == "Reprocess previewed"


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


def test_queue_panel_auto_refresh_is_opt_in_and_stops(conn):
    panel = QueuePanel(conn, Q, refresh_every=0.5)
    assert not panel.refresher.running
    panel.auto.value = True
    jobs.enqueue(conn, Q, "x")
    deadline = time.time() + 3
    while panel.snapshot["pending"] != 1 and time.time() < deadline:
        time.sleep(0.02)
    assert panel.snapshot["pending"] == 1
    panel.close()
    assert not panel.refresher.running


def test_job_panel_edits_the_row(conn):
    jid = failed(conn, Q, 1)[0]
    panel = JobPanel(conn, Q, jid)
    assert not panel.reprocess_button.disabled
    panel.payload.value = "{not json"
    panel.update_button.click()
    assert panel.status_text.startswith("error: malformed JSON")
    assert jobs.get_job(conn, Q, jid)["payload"] == '{"n": 0}'
    panel.payload.value = '{"n": 0, "fixed": true}'
    panel.update_button.click()
    assert jobs.get_job(conn, Q, jid)["payload"] == '{"n": 0, "fixed": true}'
    panel.progress_value.value = "75"
    panel.progress_button.click()
    panel.log_line.value = "mended by hand"
    panel.log_button.click()
    assert jobs.get_job_logs(conn, Q, jid) == ["mended by hand"]
    panel.reprocess_button.click()
    assert jobs.get_job(conn, Q, jid)["state"] == "pending"
    assert panel.reprocess_button.disabled  # no longer dead
    panel.remove_button.click()
    assert panel.row is None and "gone" in panel.row_view.value
    # the line says the removal (the hostile pass of #41: it said "refused: job mail … — gone")
    assert panel.status_text == f"removed {jid}"


def test_job_panel_refusal_changes_nothing(conn):
    jid = jobs.enqueue(conn, Q, "x")
    jobs.claim(conn, Q, 60_000)
    panel = JobPanel(conn, Q, jid)
    before = dump(conn)
    panel.remove_button.click()
    assert panel.status_text == f"refused: remove mail {jid} — locked"
    assert dump(conn) == before


def test_dead_letter_panel_in_bulk(conn):
    ids = failed(conn, Q, 4) + failed(conn, Q, 2, error="timeout")
    panel = DeadLetterPanel(conn, Q)
    assert "6 dead" in panel.summary.value and "timeout" in panel.errors_view.value
    assert panel.reprocess_button.disabled and panel.remove_button.disabled  # nothing selected
    panel.select.value = tuple(ids[:2])
    assert not panel.reprocess_button.disabled
    panel.reprocess_button.click()  # 2, not above confirm_above: at once
    assert panel.status_text == "reprocess selected: 2 reprocessed"
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 4
    panel.select.value = (ids[2],)
    panel.remove_button.click()  # a removal always asks
    assert "Remove <b>1</b> selected dead jobs of mail?" in panel.confirmation.text.value
    assert conn.client.exists(f"emq:{{{Q}}}:job:{ids[2]}")
    panel.confirmation.confirm_button.click()
    assert panel.status_text == "remove selected: 1 removed"
    assert not conn.client.exists(f"emq:{{{Q}}}:job:{ids[2]}")
    panel.budget.value = 2
    panel.reprocess_all_button.click()
    assert panel.status_text == "reprocessed 3 dead jobs"
    assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 0 and len(panel.select.options) == 0
    assert panel.reprocess_all_button.disabled  # nothing left to reprocess


def test_events_view_tails_and_stops(conn):
    view = EventsView(conn, Q)
    jid = jobs.enqueue(conn, Q, "x")
    jobs.update_progress(conn, Q, jid, "10")
    deadline = time.time() + 3
    while view.seen < 2 and time.time() < deadline:
        time.sleep(0.02)
    assert [e["event"] for e in view.events] == ["added", "progress"]
    assert "progress" in view.lines.value
    view.stop_button.click()
    assert not view.running and view.status_text == "stopped after 2 events"
    jobs.update_progress(conn, Q, jid, "20")
    time.sleep(0.3)
    assert view.seen == 2
    view.close()


def test_a_failing_auto_refresh_stops_says_why_and_turns_its_toggle_off(conn):
    """The one refresh loop (widgets/refresher.py) with stop_on_error, as QueuePanel
    and Dashboard use it: the error is the status line, the toggle goes off, the
    thread ends, and no other tick runs."""
    panel = QueuePanel(conn, Q, refresh_every=0.5)
    calls = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("server gone")

    panel.refresher.tick = broken
    panel.auto.value = True
    deadline = time.time() + 5
    while (panel.auto.value or panel.refresher.running) and time.time() < deadline:
        time.sleep(0.02)
    assert panel.auto.value is False and not panel.refresher.running
    assert panel.status_text == "auto-refresh stopped: RuntimeError: server gone"
    time.sleep(1.2)
    assert calls == [1]
    panel.close()


def test_a_refresher_without_stop_on_error_keeps_going():
    """MetricsView's and HealthView's policy: an error is reported and the next tick tries again."""
    from emq_notebook.widgets.refresher import Refresher

    seen: list[Exception] = []
    ticks = []

    def tick() -> None:
        ticks.append(1)
        if len(ticks) == 1:
            raise RuntimeError("once")

    r = Refresher("emq-test", 0.05, tick, seen.append)
    r.start()
    deadline = time.time() + 5
    while len(ticks) < 3 and time.time() < deadline:
        time.sleep(0.02)
    r.stop()
    assert len(ticks) >= 3 and [str(e) for e in seen] == ["once"] and not r.running


def test_the_budget_boxes_stop_at_the_largest_budget_a_call_takes(conn):
    from emq_notebook import defaults

    jobs.enqueue(conn, "mail", "{}")
    panels = [QueuePanel(conn, "mail"), DeadLetterPanel(conn, "mail")]
    try:
        # the queue panel's drives drains and obliterates; the dead letters' reprocesses,
        # whose calls rewrite each job they move
        bounds = [
            (defaults.DEFAULT_BUDGET, defaults.MAX_BUDGET),
            (defaults.MOVE_BUDGET, defaults.MAX_MOVE_BUDGET),
        ]
        for panel, (default, most) in zip(panels, bounds, strict=True):
            assert (panel.budget.value, panel.budget.max) == (default, most)
            panel.budget.value = most + 1  # the box clamps what is typed
            assert panel.budget.value == most
    finally:
        for panel in panels:
            panel.close()


def test_values_read_as_an_operator_reads_them(conn, monkeypatch):
    """Whole job ids (the row header as wide as the longest), times in the viewer's zone
    with its name, whole numbers thousands separated, the Dead letters tab's one error
    table (signatures of the whole set), an event one line with its time and words."""
    import re

    from emq_notebook.widgets import grid as grids
    from emq_notebook.widgets import values
    from emq_notebook.widgets.events_view import event_line
    from emq_notebook.widgets.job_grid import JobsView

    monkeypatch.setattr(values, "_zone", None)
    assert values.set_zone("Europe/Berlin")
    local = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T$")
    ids = [jid for n in (30, 31, 32) for jid in failed(conn, Q, 1, f"TimeoutError: after {n} s")]
    jobs.enqueue_many(conn, Q, ["{}"] * 1_200)

    view = JobsView(conn, Q, state="dead")
    assert set(view.grid.data["id"]) == set(ids)  # a column: the row header is hidden
    assert all(len(i) == 28 for i in view.grid.data["id"])  # j_ and a whole ULID
    assert view.grid.column_widths["id"] >= grids.CHAR_PX * 28
    assert all(local.match(t) for t in view.grid.data["at"]), view.grid.data["at"].tolist()
    assert view.grid.renderers["failures"].format == ",d"
    view.close()
    pending = JobsView(conn, Q, state="pending")
    assert "of 1,200 pending" in pending.page_label.value
    pending.close()

    panel = DeadLetterPanel(conn, Q)
    shown = "".join(c.value for c in panel.children if hasattr(c, "value") and isinstance(c.value, str))
    assert shown.count("<table") == 1 and "the errors of all 3 dead jobs, by signature" in shown
    assert "TimeoutError: after &lt;num&gt; s</td><td>3</td>" in panel.errors_view.value
    seen = re.search(r"<td>3</td><td>([^<]+)</td>", panel.errors_view.value)
    assert seen and local.match(seen.group(1))
    panel.close()

    job = JobPanel(conn, Q, ids[0])
    said = "".join(c.value for c in job.children if isinstance(getattr(c, "value", None), str))
    created = re.search(r"<td>created_at</td><td>([^<]+) \(\d+\)</td>", said)
    assert created and local.match(created.group(1))
    job.close()

    line = event_line({"event": "completed", "job": ids[0], "attempts": 1}, at=1_796_394_205.0)
    assert "\n" not in line
    assert re.match(rf"^\d\d:\d\d:\d\d CES?T  completed  job {ids[0]}  attempts 1$", line), line


def test_a_time_that_is_no_ascii_whole_number_is_no_time():
    """`when` of text another node wrote: digits "²²", other scripts' digits, 400 digits, an
    int too large for a float, all "" (no time), never an error."""
    from emq_notebook.widgets import values

    for value in ("²²", "٣٤٥٦٧", "9" * 400, "1" * 5_000, 10**400, "", " ", "12a"):
        assert values.when(value) == "", value
    assert values.when("1700000000000") == values.when(1_700_000_000_000) != ""


# -- the dead set newest first, a job read whole ---------------------------------------
def clicked(grid, row: int) -> None:
    """The message a browser sends for a click on a body cell of `row`."""
    grid._handle_custom_msg(
        {"event_type": "cell-click", "region": "body", "column": "state", "column_index": 0}
        | {"row": row, "primary_key_row": row, "cell_value": None},
        [],
    )


def test_jobs_view_pages_100000_dead_newest_first_in_the_servers_order(conn, monkeypatch):
    """100,000 dead (another node's rows, died in id order, attempts 1 to 7): the first
    page is the 100 newest deaths, Last the 100 oldest, the order box's attempts order the
    server's; every page, first or last, is one `@read_dead_page` call and its rows."""
    from dead_letters import written_rows

    from emq_notebook import connector
    from emq_notebook.widgets.job_grid import JobsView

    q, n = "deadpage", 100_000
    ids = [f"d{i:06d}" for i in range(n)]
    for at in range(0, n, 10_000):
        written_rows(
            conn,
            q,
            "dead",
            ids[at : at + 10_000],
            first=1_700_000_000_000 + at,
            attempts=lambda i, at=at: str(1 + (at + i) % 7),
        )
    runs: list[tuple[str, list]] = []
    real = connector.Connection.run

    def run(c, name, keys, args=(), **kw):
        runs.append((name, list(args)))
        return real(c, name, keys, args, **kw)

    monkeypatch.setattr(connector.Connection, "run", run)
    view = JobsView(conn, q, state="dead")
    try:
        assert view.order.value == "time" and view.order.layout.display == "flex"
        assert list(view.frame.index) == ids[::-1][:100]
        assert view.page_label.value == "rows 1–100 of 100,000 dead"
        assert view.prev_button.disabled and view.first_button.disabled and not view.last_button.disabled
        assert [name for name, _ in runs] == ["read_dead_page", "read_rows"]
        runs.clear()
        view.last_button.click()
        assert list(view.frame.index) == ids[99::-1]  # the oldest 100, the newest of them first
        assert view.page_label.value == "rows 99,901–100,000 of 100,000 dead"
        assert view.next_button.disabled and view.last_button.disabled
        assert [name for name, _ in runs] == ["read_dead_page", "read_rows"] and runs[0][1][2] == n - 100
        view.prev_button.click()
        assert list(view.frame.index) == ids[199:99:-1]
        view.order.value = "attempts"  # the server ranks the 1,000 newest by attempts
        assert list(view.frame["attempts"]) == [7] * 100
        sevens = [i for i in range(n - 1, n - 1_001, -1) if 1 + i % 7 == 7]
        assert list(view.frame.index) == [ids[i] for i in sevens[:100]]
        assert view.page_label.value == "rows 1–100 of the 1,000 newest of 100,000 dead"
        view.order.value = "oldest"
        assert list(view.frame.index) == ids[:100] and view.prev_button.disabled
        view.next_button.click()
        assert list(view.frame.index) == ids[100:200]
        # the time of death whole, its zone named: the column as wide as its text
        assert view.grid.column_widths["at"] >= 8 * max(len(t) for t in view.grid.data["at"])
    finally:
        view.close()


def test_a_row_click_shows_the_whole_error_payload_and_logs_in_the_viewers_zone(conn, monkeypatch):
    """A click on a row reads the job (`jobs.get_job`, its logs) and shows it whole below
    the grid: a 10 KB traceback every character of it, the payload, every log line, the
    times in the viewer's zone with the zone's name (never cut mid-zone)."""
    import html
    import re

    from emq_notebook.widgets import values
    from emq_notebook.widgets.job_grid import JobsView

    monkeypatch.setattr(values, "_zone", None)
    assert values.set_zone("America/Argentina/Buenos_Aires")
    trace = "".join(f'  File "worker.py", line {i}, in send\n    smtp.send(m)  # <{i}>\n' for i in range(200))
    error = "Traceback (most recent call last):\n" + trace + "SMTPError: 550 mailbox unavailable"
    assert len(error) > 10_000
    jid = jobs.enqueue(conn, Q, '{"to": "a@example.com", "n": [1, 2]}', max_attempts=1)
    jobs.claim(conn, Q, 60_000)
    jobs.add_log(conn, Q, jid, "tried mx1")
    jobs.fail(conn, Q, jid, error)
    other = failed(conn, Q, 1, "boom")[0]
    view = JobsView(conn, Q, state="dead")
    try:
        assert view.detail.job_id is None and "click a row" in view.detail.head.value
        row = list(view.frame.index).index(jid)
        clicked(view.grid, row)
        body = view.detail.body.value
        assert view.detail.job_id == jid and html.escape(error) in body
        assert "&lt;199&gt;" in body and "<199>" not in body
        assert f"{len(error):,} characters" in body
        assert html.escape('"to": "a@example.com"') in body and "tried mx1" in body
        created = re.search(r"<td>created_at</td><td>([^<]+) \(\d+\)</td>", body)
        assert created and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d -03", created.group(1))
        assert "white-space:pre-wrap" in body and "overflow:auto" in body and "monospace" in body
        clicked(view.grid, list(view.frame.index).index(other))
        assert view.detail.job_id == other and "boom" in view.detail.body.value
    finally:
        view.close()
