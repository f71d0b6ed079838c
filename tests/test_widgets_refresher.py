"""Refresher (emq_notebook/widgets/refresher.py) through a panel's auto-refresh and by
itself, on both backends: one thread per panel, whatever the toggle is clicked; a
refresh that fails stops and says why, or (without stop_on_error) goes on."""

import time

from panels import emq_threads

from emq_notebook.widgets import QueuePanel

Q = "mail"


def test_auto_refresh_is_one_thread_per_panel(conn):
    panel = QueuePanel(conn, Q, refresh_every=0.5, auto=True)
    for on in (False, True, False, True, True):
        panel.auto.value = on
    assert len([t for t in emq_threads() if t.name == f"emq-refresh-{Q}"]) == 1
    panel.close()
    assert not emq_threads()


# -- a refresh that fails: stopped or kept going


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
