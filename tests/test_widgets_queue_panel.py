"""QueuePanel (emq_notebook/widgets/queue_panel.py) driven in Python and as a saved
notebook and a careful operator see it, on both backends: its static fallback; its
buttons (pause, a gated and bounded obliterate, an opt-in auto-refresh, the budget box)
changing the real keyspace and refusals not; a queue gone said gone; a drain and an
obliterate that state their count, recount at confirm and ask again; a refresh thread
that meets a lost server or a foreign key says so and prints nothing."""

import time

from helpers import dump, failed, keys_of, lost_server, until
from panels import VIEW, emq_threads, shown

from emq_notebook import admin, jobs
from emq_notebook.widgets import DeadLetterPanel, QueuePanel

Q = "mail"


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


# -- its buttons: pause, a gated and bounded obliterate, a queue gone, an opt-in auto-refresh, the budget box


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
