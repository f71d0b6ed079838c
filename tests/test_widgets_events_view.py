"""EventsView (emq_notebook/widgets/events_view.py), on both backends: it tails and stops,
its static fallback shows the last events, one subscription however often it is rebuilt,
a thread that dies says so and starts again, an event that is not UTF-8 is shown escaped
and the tail goes on."""

import html
import threading
import time

from helpers import until
from panels import shown, unsendable

from emq_notebook import connector, jobs
from emq_notebook.widgets import EventsView

Q = "mail"
CHANNEL = f"emq:{{{Q}}}:events"


def test_events_view_fallback_shows_the_last_events(conn, ip):
    view = EventsView(conn, Q)
    jid = jobs.enqueue(conn, Q, "x", id="j_shown")
    jobs.update_progress(conn, Q, jid, "40")
    assert until(lambda: view.seen == 2)
    data = shown(ip, view)
    view.close()
    assert "events seen: 2" in data["text/plain"]
    assert "progress  job j_shown" in data["text/plain"] and "j_shown" in data["text/html"]


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


# -- a tail that stops


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
