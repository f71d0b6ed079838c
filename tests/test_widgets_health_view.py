"""HealthView (emq_notebook/widgets/health_view.py) through the widget API, on both backends:
what it shows, its one background thread, its static fallback."""

import warnings

import ipywidgets
import pytest
from helpers import until
from views import Q, threads, work

from emq_notebook import admin, health, jobs
from emq_notebook.plots import VERDICT_COLOURS
from emq_notebook.widgets import HealthView

# -- MetricsView and HealthView through the widget API, on both backends: what they show, their one
# background thread each, and their static fallback.

# -- HealthView ------------------------------------------------------------------


@pytest.mark.usefixtures("no_panel_left")
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


@pytest.mark.usefixtures("no_panel_left")
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


@pytest.mark.usefixtures("no_panel_left")
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


@pytest.mark.usefixtures("no_panel_left")
def test_health_view_on_a_read_only_connection(conn, connect_as):
    work(conn, n=2)
    ro = connect_as()
    ro.read_only = True
    view = HealthView(ro)
    assert view.verdicts == {Q: "ok"} and "read-only" in view.static_text()
    view.close()
