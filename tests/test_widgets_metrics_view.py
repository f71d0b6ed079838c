"""MetricsView (emq_notebook/widgets/metrics_view.py) through the widget API, on both backends:
what it shows, its one background thread, its static fallback."""

import base64
import time

import pytest
from helpers import lost_server, until
from views import Q, threads, work

import emq_notebook as emq
from emq_notebook.widgets import MetricsView
from emq_notebook.widgets.base import live_panels

# -- MetricsView and HealthView through the widget API, on both backends: what they show, their one
# background thread each, and their static fallback.

# -- MetricsView -----------------------------------------------------------------


@pytest.mark.usefixtures("no_panel_left")
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


@pytest.mark.usefixtures("no_panel_left")
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


@pytest.mark.usefixtures("no_panel_left")
def test_rebuilding_a_metrics_view_leaves_one_thread(conn):
    views = [MetricsView(conn, Q, refresh_every=0.5) for _ in range(4)]
    other = MetricsView(conn, "other", refresh_every=0.5)
    assert threads() == [f"emq-metrics-{Q}", "emq-metrics-other"]
    assert [v.running for v in views] == [False, False, False, True]
    assert views[-1] in live_panels() and views[0] not in live_panels()
    other.close()
    views[-1].close()
    assert threads() == []


@pytest.mark.usefixtures("no_panel_left")
def test_a_metrics_view_that_loses_the_server_says_so(backend, capfd):
    with lost_server(backend) as conn:
        view = MetricsView(conn, "lost", refresh_every=0.5)
        assert view.status_text.startswith("error: lost the server at ")
        view.say("")
        assert until(lambda: view.status_text.startswith("error: lost the server at "))
        assert view.running  # it keeps trying
    view.close()
    assert capfd.readouterr() == ("", "")


@pytest.mark.usefixtures("no_panel_left")
def test_a_bad_window_or_interval_is_refused_before_any_io():
    conn = emq.connect("redis://127.0.0.1:1/0")
    with pytest.raises(emq.EMQError):
        MetricsView(conn, Q, since="soon")
    with pytest.raises(emq.EMQError):
        MetricsView(conn, Q, refresh_every=0)
    assert threads() == []
