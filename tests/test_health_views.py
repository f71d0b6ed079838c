"""MetricsView and HealthView through the widget API, on both backends: what they
show, their one background thread each, and their static fallback."""

from __future__ import annotations

import base64
import threading
import time
import warnings

import ipywidgets
import pytest
from helpers import lost_server, until, worked

import emq_notebook as emq
from emq_notebook import admin, health, jobs
from emq_notebook.plots import VERDICT_COLOURS
from emq_notebook.widgets import HealthView, MetricsView
from emq_notebook.widgets.base import close_all, live_panels

Q = "mail"


def threads(prefix="emq-"):
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(prefix))


@pytest.fixture(autouse=True)
def no_panel_left():
    yield
    close_all()
    assert threads() == []


def work(conn, q=Q, n=4, fail=0):
    worked(conn, q, n, fail)


# -- MetricsView -----------------------------------------------------------------


def test_metrics_view_shows_both_plots_and_when(conn):
    work(conn, n=5, fail=1)
    view = MetricsView(conn, Q, refresh_every=0.5, auto=False)
    outs = view.out.outputs
    assert [o["data"]["text/plain"] for o in outs] == [
        f"{Q}: jobs per minute, last 1 h",
        f"{Q}: wait and run time, last 1 h",
    ]
    assert all(base64.b64decode(o["data"]["image/png"])[:4] == b"\x89PNG" for o in outs)
    assert view.summary["claimed"] == 5 and view.summary["failed"] == 1
    assert view.summary["completed"] == 4
    assert view.refreshed_at and f"last refreshed {view.refreshed_at}" in view.refreshed.value
    assert "stopped" in view.refreshed.value and not view.running and threads() == []
    bundle = view._repr_mimebundle_()
    assert f"last refreshed: {view.refreshed_at}" in bundle["text/plain"]
    assert "claimed | 5" in bundle["text/plain"]
    assert bundle["text/html"].count('src="data:image/png;base64,') == 2
    view.close()


def test_metrics_view_refreshes_in_one_thread_until_stopped(conn):
    view = MetricsView(conn, Q, refresh_every=0.5)
    assert view.running and threads() == [f"emq-metrics-{Q}"]
    assert "every 0.5s" in view.refreshed.value and view.stop_button.description == "Stop"
    work(conn, n=3)
    assert until(lambda: view.summary.get("claimed") == 3)  # the thread drew it
    view.stop_button.click()
    assert not view.running and threads() == [] and view.stop_button.description == "Start"
    seen = view.refreshes
    time.sleep(1.2)
    assert view.refreshes == seen  # stopped means stopped
    view.stop_button.click()
    assert view.running and threads() == [f"emq-metrics-{Q}"]
    view.close()
    assert threads() == []


def test_rebuilding_a_metrics_view_leaves_one_thread(conn):
    views = [MetricsView(conn, Q, refresh_every=0.5) for _ in range(4)]
    other = MetricsView(conn, "other", refresh_every=0.5)
    assert threads() == [f"emq-metrics-{Q}", "emq-metrics-other"]
    assert [v.running for v in views] == [False, False, False, True]
    assert views[-1] in live_panels() and views[0] not in live_panels()
    other.close()
    views[-1].close()
    assert threads() == []


def test_a_metrics_view_that_loses_the_server_says_so(backend, capfd):
    with lost_server(backend) as conn:
        view = MetricsView(conn, "lost", refresh_every=0.5)
        assert view.status_text.startswith("error: lost the server at ")
        view.say("")
        assert until(lambda: view.status_text.startswith("error: lost the server at "))
        assert view.running  # it keeps trying
    view.close()
    assert capfd.readouterr() == ("", "")


def test_a_bad_window_or_interval_is_refused_before_any_io():
    conn = emq.connect("redis://127.0.0.1:1/0")
    with pytest.raises(emq.EMQError):
        MetricsView(conn, Q, since="soon")
    with pytest.raises(emq.EMQError):
        MetricsView(conn, Q, refresh_every=0)
    assert threads() == []


# -- HealthView ------------------------------------------------------------------


def test_health_view_puts_the_most_urgent_first_sortable_with_a_dead_column(conn):
    work(conn, "mail", n=4, fail=3)  # failing, 3 dead
    work(conn, "fine", n=3)  # ok
    jobs.enqueue(conn, "held", "x")
    admin.pause(conn, "held")  # paused
    view = HealthView(conn)
    assert view.verdicts == {"mail": "failing", "held": "paused", "fine": "ok"}
    assert list(view.frame.index) == ["mail", "held", "fine"]  # most urgent first
    shown = view.grid.data
    # the grid holds the queues in name order and sorts in the browser: by rank at first
    assert list(shown.index) == ["fine", "held", "mail"]
    assert view.grid._transforms == [{"type": "sort", "column": "#", "desc": False}]
    assert shown.loc[["mail", "held", "fine"], "#"].tolist() == [1, 2, 3]
    # the verdict column holds the severity (a sort by it is most urgent first), shown as words
    assert shown.loc[["mail", "held", "fine"], "verdict"].tolist() == [
        health.SEVERITY.index(v) for v in ("failing", "paused", "ok")
    ]
    assert "'failing', 'stuck'" in view.grid.renderers["verdict"].text_value.value
    assert shown.loc["mail", "dead"] == 3 and shown.loc["fine", "dead"] == 0
    for verdict in ("failing", "paused", "ok"):  # one colour a verdict, counted
        assert f"background:{VERDICT_COLOURS[verdict]};color:white" in view.summary.value
    assert ">1 failing</span>" in view.summary.value
    assert len(set(VERDICT_COLOURS.values())) == len(VERDICT_COLOURS)
    assert view.status_text == "needs a look: mail"
    text = view.static_text()
    assert "mail | failing | 0 | 0 | 3 |" in text and "3 of 4 jobs finished in the last 5 min failed" in text
    assert text.index("mail |") < text.index("held |") < text.index("fine |")
    assert "HealthView(every queue)" in view._repr_mimebundle_()["text/html"]
    view.close()


def live_widgets() -> int:
    with warnings.catch_warnings():  # the count the brief names; ipywidgets 8 deprecates the name
        warnings.simplefilter("ignore", DeprecationWarning)
        return len(ipywidgets.Widget.widgets)


def test_a_health_view_refresh_patches_its_grid_in_place(conn, monkeypatch):
    from emq_notebook.widgets import grid as grids

    work(conn, "mail", n=2)
    view = HealthView(conn)
    sent = []
    monkeypatch.setattr(grids.writer(), "send", sent.append)
    before = live_widgets()
    jobs.enqueue(conn, "mail", "x")
    view.refresh()
    assert len(sent) == 1 and sent[0]["grid"] == view.grid.model_id
    [(row, queue, values)], pending = sent[0]["rows"], sent[0]["columns"].index("pending")
    assert (row, queue, values[pending]) == (0, "mail", 1)  # one row, pending 1
    assert live_widgets() == before
    view.close()


def test_health_view_refresh_and_its_one_thread(conn):
    view = HealthView(conn, ["mail"], refresh_every=0.5)
    # a queue with no key is not idle: the view says it is unknown
    assert view.verdicts == {} and threads() == []
    assert view.status_text.startswith("error: no queue 'mail'")
    jobs.enqueue(conn, "mail", "x")
    view.refresh_button.click()
    assert view.verdicts == {"mail": "growing"} and "refresh by hand" in view.refreshed.value
    view.auto_button.click()
    assert view.running and threads() == ["emq-health"]
    view.auto_button.click()
    assert not view.running and threads() == []
    again = HealthView(conn, ["mail"], refresh_every=0.5, auto=True)
    also = HealthView(conn, ["mail"], refresh_every=0.5, auto=True)
    assert threads() == ["emq-health"] and not again.running and also.running
    admin.pause(conn, "mail")
    assert until(lambda: also.verdicts == {"mail": "paused"})
    also.close()
    view.close()


def test_health_view_on_a_read_only_connection(conn, connect_as):
    work(conn, n=2)
    ro = connect_as()
    ro.read_only = True
    view = HealthView(ro)
    assert view.verdicts == {Q: "ok"} and "read-only" in view.static_text()
    view.close()
