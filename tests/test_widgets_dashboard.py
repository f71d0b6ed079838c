"""The dashboard driven through its widgets (clicks, value changes, a grid's selection
and cell-click messages as the browser sends them), on both backends: the overview,
drilling down, paging, acting on exactly the selected ids, read-only sessions, one
thread per dashboard, and what opening it costs on a 100,000-job queue."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
import redis
from helpers import dump, until

import emq_notebook as emq
from emq_notebook import admin, audit, frames, jobs, lanes, repeat, triage, watching
from emq_notebook import health as health_module
from emq_notebook.connector import Connection
from emq_notebook.decoding import printable
from emq_notebook.plots import VERDICT_COLOURS
from emq_notebook.widgets import AuditView, Dashboard, DeadLetterPanel, EventsView, JobPanel, QueuePanel
from emq_notebook.widgets import grid as grids
from emq_notebook.widgets.base import live_panels
from emq_notebook.widgets.job_grid import JobsView
from emq_notebook.widgets.lanes_view import LanesView, RepeatablesView

Q = "mail"
VIEW = "application/vnd.jupyter.widget-view+json"


def dead(conn, q, n, error="SMTP 550", start=0):
    ids = []
    for i in range(start, start + n):
        jid = jobs.enqueue(conn, q, f'{{"n": {i}}}', id=f"j_{i:04d}", max_attempts=1)
        assert jobs.claim(conn, q, 60_000)[0] == jid
        jobs.fail(conn, q, jid, f"{error} user{i}")
        ids.append(jid)
    return ids


@contextlib.contextmanager
def opened(*args, **kwargs):
    """A Dashboard, closed on the way out."""
    d = Dashboard(*args, **kwargs)
    try:
        yield d
    finally:
        d.close()


def click(grid, row, column="state"):
    """The message a browser sends for a click on a body cell of `row`."""
    grid._handle_custom_msg(
        {
            "event_type": "cell-click",
            "region": "body",
            "column": column,
            "column_index": 0,
            "row": row,
            "primary_key_row": row,
            "cell_value": None,
        },
        [],
    )


def select(grid, *rows):
    """The selection as the browser syncs it: one rectangle per (first, last) row pair."""
    grid.selections = [{"r1": a, "c1": 0, "r2": b, "c2": 0} for a, b in rows]


@pytest.fixture
def stage(conn):
    ids = dead(conn, Q, 3)
    for i in range(2):
        jobs.enqueue(conn, Q, f'{{"p": {i}}}')
    jobs.enqueue(conn, "reports", "{}", group="acme")
    jobs.enqueue(conn, "reports", "{}", delay_ms=60_000)
    admin.pause(conn, "reports")
    return ids


def test_the_overview_has_every_queue_with_its_counts(conn, stage, ip):
    with opened(conn, auto=False) as d:
        assert list(d.overview.index) == ["mail", "reports"]
        assert d.overview[list(frames.counts(conn).columns)].equals(frames.counts(conn))
        assert d.overview.loc["reports", "verdict"] == "paused"
        shown = d.grid.data
        assert shown.loc["mail", ["pending", "active", "schedule", "dead"]].tolist() == [2, 0, 0, 3]
        assert shown.loc["reports", "state"] == "paused" and shown.loc["mail", "state"] == "running"
        assert shown.loc["reports", ["pending", "schedule", "lanes"]].tolist() == [1, 1, 1]
        # numbers right-aligned with thousands separators, dead coloured
        assert d.grid.renderers["dead"].format == ",d"
        assert d.grid.renderers["dead"].horizontal_alignment == "right"
        assert "cell.value > 0" in d.grid.renderers["dead"].background_color.value
        assert list(d.picker.options) == ["mail", "reports"] and d.q is None
        assert "2 queues · 3 pending · 0 active · 1 schedule · 3 dead · 1 paused" in d.summary.value
        data, _ = ip.display_formatter.format(d)
        assert VIEW in data
        assert data["text/plain"].startswith(f"Dashboard(dashboard) · env not set · connected: {conn.label}")
        # the verdict (frames.health) follows the state, in words in the saved view
        verdict = d.overview.loc["mail", "verdict"].replace("_", " ")
        why = d.overview.loc["mail", "why"]
        assert f"{verdict} | mail | {why} | 2 | 0 | 0 | 3 | running | 1 |" in data["text/plain"]
        assert '<td style="text-align:right">3</td>' in data["text/html"]
        # the saved view counts the verdicts too, each in its colour
        assert ">1 failing<" in data["text/html"] and ">1 paused<" in data["text/html"]
        assert "all 2 shown" in data["text/html"]


def test_a_new_queue_shows_on_refresh(conn, stage):
    d = Dashboard(conn, auto=False)
    jobs.enqueue(conn, "fresh", "{}")
    d.refresh_button.click()
    assert "fresh" in d.overview.index and "fresh" in d.picker.options
    assert d.picker.value == "" and d.q is None  # replacing the options opened nothing
    d.close()


def test_a_refresh_reads_the_counts_once_for_the_overview_its_verdicts_and_the_open_panel(
    conn, stage, monkeypatch
):
    with opened(conn, auto=False, queue=Q) as d:
        reads: list = []
        real = watching.read

        def counted(*args, **kw):
            reads.append(list(args[1]))
            return real(*args, **kw)

        monkeypatch.setattr(watching, "read", counted)
        d.refresh()
        assert reads == [sorted(d.overview.index)]  # one read of every queue, shared
        assert "pending <b>2</b>" in d.parts["Overview"].counts.value


def test_the_overview_puts_the_most_urgent_first_and_counts_each_verdict(conn, stage):
    jobs.enqueue(conn, "quiet", "{}", delay_ms=3_600_000)  # idle
    with opened(conn, auto=False) as d:
        assert list(d.overview.index) == ["mail", "reports", "quiet"]
        assert list(d.overview["verdict"]) == ["failing", "paused", "idle"]
        shown = [c.description for c in d.chips_box.children if c.layout.display != "none"]
        assert shown[:3] == ["1 failing", "1 paused", "1 idle"]  # most urgent first
        # the grid holds the queues by name and shows them most urgent first (#)
        assert list(d.grid.data.index) == ["mail", "quiet", "reports"]
        assert d.grid.data["#"].tolist() == [1, 3, 2]
        assert d.grid._transforms == [{"type": "sort", "column": "#", "desc": False}]


def test_the_rescan_button_finds_a_queue_another_process_made(conn, stage):
    with opened(conn, auto=False) as d:
        conn.client.hset("emq:{elsewhere}:meta", "created_at", "1")
        d.refresh_button.click()
        assert "elsewhere" not in d.overview.index  # a refresh reads the queues known
        d.rescan_button.click()
        assert "elsewhere" in d.overview.index and "elsewhere" in d.picker.options
        assert d.status_text.startswith("rescanned: 3 queues")


def test_clicking_a_queue_opens_its_tabs_built_from_the_panels(conn, stage):
    with opened(conn, auto=False) as d:
        assert d.tabs.layout.display == "none"
        click(d.grid, list(d.shown_frame.index).index("mail"))
        assert d.q == "mail" and d.picker.value == "mail"
        assert d.tabs.titles[:4] == ("Overview", "Jobs", "Job", "Dead letters")
        overview = d.parts["Overview"]
        assert isinstance(overview, QueuePanel) and overview.owned and overview.q == "mail"
        assert "pending <b>2</b>" in overview.counts.value and "dead <b>3</b>" in overview.counts.value
        assert set(d.parts) == {"Overview"}  # the other tabs wait to be shown
        kinds = {
            "Jobs": JobsView,
            "Dead letters": DeadLetterPanel,
            "Lanes": LanesView,
            "Repeatables": RepeatablesView,
            "Events": EventsView,
            "Audit": AuditView,
        }
        for name, kind in kinds.items():
            assert isinstance(d.tab(name), kind), name
        assert d.parts["Jobs"].state.value == "dead"  # opens on the dead jobs
        assert d.parts["Dead letters"].summary.value.startswith("<div>3 dead")
        events = d.parts["Events"]
        assert events.running and events.owned
        d.picker.value = "reports"  # another queue: the tabs of mail close
        assert not events.running and events.comm is None
        assert d.q == "reports" and set(d.parts) == {"Overview"}
        assert d.parts["Overview"].paused


def browser_sorts(grid):
    """What the browser does after a patch: it sorts the grid's rows again by `#` and
    says their order (`_visible_rows`); its selection stays on a row POSITION."""
    ranks = list(grid._data["data"]["#"])
    grid._visible_rows = sorted(range(len(ranks)), key=ranks.__getitem__)


def highlighted(d) -> list[str]:
    """The queues of the highlighted rows, as the browser shows them."""
    order = list(d.grid._visible_rows)
    return [str(d.shown_frame.index[order[r["r1"]]]) for r in d.grid.selections]


def test_the_highlight_follows_the_open_queue_when_a_refresh_ranks_another_above(conn):
    for q in ("alpha", "beta", "gamma"):
        jobs.enqueue(conn, q, "{}", delay_ms=3_600_000)  # idle: ranked by name
    with opened(conn, auto=False) as d:
        browser_sorts(d.grid)
        assert list(d.overview.index) == ["alpha", "beta", "gamma"]
        at = list(d.grid._visible_rows).index(list(d.shown_frame.index).index("beta"))
        select(d.grid, (at, at))  # the browser's click: the row selected, then the cell-click
        click(d.grid, list(d.shown_frame.index).index("beta"))
        assert d.q == "beta" and highlighted(d) == ["beta"]
        dead(conn, "gamma", 2)  # gamma starts failing: ranked first
        d.refresh()
        browser_sorts(d.grid)
        assert list(d.overview.index)[0] == "gamma"
        assert highlighted(d) == ["beta"] and d.q == "beta"
        # the operator sorts by another column: the highlight follows again
        d.grid._visible_rows = list(reversed(d.grid._visible_rows))
        assert highlighted(d) == ["beta"]


def test_the_highlight_follows_the_open_queue_through_the_name_filter(conn):
    for q in ("alpha", "beta", "gamma"):
        jobs.enqueue(conn, q, "{}", delay_ms=3_600_000)
    with opened(conn, auto=False, queue="gamma") as d:
        assert highlighted_by_rank(d) == ["gamma"]  # opened by name: highlighted too
        d.name_filter.value = "a"  # alpha, beta, gamma all match: the rows replaced
        assert highlighted_by_rank(d) == ["gamma"]
        d.name_filter.value = "be"  # gamma filtered out: no highlight, its tabs stay
        assert d.grid.selections == [] and d.q == "gamma"
        d.name_filter.value = "m"
        assert highlighted_by_rank(d) == ["gamma"]
        browser_sorts(d.grid)  # the browser drew the rows: the same highlight
        assert highlighted(d) == ["gamma"]


def highlighted_by_rank(d) -> list[str]:
    """The highlighted queues before the browser said its order: by the grid's sort (`#`)."""
    by_rank = sorted(d.shown_frame.index, key=lambda q: d.shown_frame.loc[q, "#"])
    return [str(by_rank[r["r1"]]) for r in d.grid.selections]


def test_the_open_queue_obliterated_elsewhere_is_said_gone_and_its_tab_writes_nothing(
    conn, stage, connect_as
):
    with opened(conn, auto=False, queue=Q) as d:
        overview = d.parts["Overview"]
        assert "running" in overview.counts.value and not overview.pause_button.disabled
        other = connect_as()
        admin.pause(other, Q)
        admin.obliterate_all(other, Q)
        d.refresh()
        assert Q not in d.overview.index and d.grid.selections == []  # no row, no highlight
        assert "queue mail</b> <span" in d.queue_title.value and "is gone" in d.queue_title.value
        assert overview.gone and "queue mail is gone" in overview.counts.value
        assert overview.pause_button.disabled and overview.pause_button.tooltip == "queue mail is gone"
        before = dump(conn)
        overview.pause_button.click()
        assert dump(conn) == before  # no meta hash made again


def test_a_reason_typed_in_a_dashboard_tab_is_the_audit_entrys_reason(conn, stage):
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        assert view.reason in view.children and d.reason not in d.children  # the tabs write
        view.reason.value = "INC-7 clear the poison jobs"
        select(view.grid, (0, 1))
        view.remove_button.click()
        view.confirm_remove_button.click()
        top = audit.read(conn, Q).iloc[0]
        assert (top.verb, top["count"], top.reason, top.surface) == (
            "remove",
            2,
            "INC-7 clear the poison jobs",
            "panel",
        )


def test_the_audit_tab_shows_who_did_what_to_the_queue_from_its_panels(conn, stage):
    with opened(conn, auto=False, queue="mail") as d:
        d.parts["Overview"].pause_button.click()  # the QueuePanel's pause toggle: a panel write
        trail = d.tab("Audit")
        assert isinstance(trail, AuditView) and trail.q == "mail"
        top = trail.entries.iloc[0]
        assert (top.verb, top.outcome, top.surface, top.queue) == ("pause", "done", "panel", "mail")
        assert "pause" in trail.table.value and "1 of 1 entries" in trail.status.value


def test_jobs_page_100_rows_at_a_time_newest_death_first(conn):
    ids = dead(conn, Q, 230)[::-1]  # died in id order: the newest first
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        assert view.frame.index.tolist() == ids[:100]
        assert view.page_label.value == "rows 1–100 of 230 dead"
        assert view.prev_button.disabled and not view.next_button.disabled
        view.next_button.click()
        assert view.frame.index.tolist() == ids[100:200]
        view.next_button.click()
        assert view.frame.index.tolist() == ids[200:] and view.next_button.disabled
        assert view.page_label.value == "rows 201–230 of 230 dead"
        view.prev_button.click()
        assert view.frame.index.tolist() == ids[100:200]
        view.order.value = "oldest"  # the server's other order, from its first page
        assert view.frame.index.tolist() == ids[::-1][:100] and view.prev_button.disabled
        view.state.value = "pending"
        assert view.frame.empty and view.page_label.value == "no pending jobs" and view.offset == 0


def test_selected_rows_reprocess_exactly_those_ids(conn):
    ids = dead(conn, Q, 8)
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        view.order.value = "oldest"  # the page in id order
        view.grid.select(1, 0)  # the Python API selects as well
        assert view.selected() == [ids[1]]
        select(view.grid, (1, 1), (5, 4))  # a rectangle: rows 4 and 5
        assert view.selected() == [ids[1], ids[4], ids[5]]
        assert "3 selected" in view.selection_label.value
        before = {i: conn.client.hgetall(f"emq:{{{Q}}}:job:{i}") for i in ids}
        view.reprocess_button.click()
        moved = [ids[1], ids[4], ids[5]]
        assert view.results == {i: "reprocessed" for i in moved}
        assert view.status_text == "3 reprocessed"
        assert "<td>reprocessed</td>" in view.outcome.value
        assert sorted(conn.client.zrange(f"emq:{{{Q}}}:pending", 0, -1)) == moved
        assert conn.client.zrange(f"emq:{{{Q}}}:dead", 0, -1) == [i for i in ids if i not in moved]
        for i in moved:  # counters stay
            assert conn.client.hget(f"emq:{{{Q}}}:job:{i}", "failures") == before[i]["failures"]
        assert view.frame.index.tolist() == [i for i in ids if i not in moved]  # the page re-read
        assert view.selected() == []


def test_selection_follows_the_browsers_sort(conn):
    ids = dead(conn, Q, 5)
    d = Dashboard(conn, auto=False, queue=Q)
    view = d.tab("Jobs")
    view.order.value = "oldest"  # the page in id order
    view.grid._visible_rows = [4, 3, 2, 1, 0]  # the browser sorted the page backwards
    view.grid.select(0, 0)
    assert view.selected() == [ids[4]]
    d.close()


def test_an_id_that_left_the_dead_set_answers_its_refusal(conn):
    ids = dead(conn, Q, 3)
    d = Dashboard(conn, auto=False, queue=Q)
    view = d.tab("Jobs")
    view.grid.select(0, 0, 2, 0)
    jobs.reprocess_job(conn, Q, ids[0])  # another operator was first
    jobs.remove_job(conn, Q, ids[1])
    view.reprocess_button.click()
    assert view.results[ids[2]] == "reprocessed"
    assert view.results[ids[0]] == "not_dead" and view.results[ids[1]] == "gone"
    d.close()


def test_remove_asks_first_and_removes_only_what_it_named(conn):
    ids = dead(conn, Q, 4)
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        view.order.value = "oldest"  # the page in id order
        select(view.grid, (0, 0), (2, 2))
        view.remove_button.click()
        assert "Remove <b>2</b> selected dead jobs of mail (j_0000, j_0002)?" in view.confirm_text.value
        assert "env not set · connected: " in view.confirm_text.value
        assert view.confirming and d.confirming
        assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 4
        select(view.grid, (0, 0), (2, 3))  # the selection grew meanwhile
        before = dump(conn)
        view.confirm_remove_button.click()
        assert dump(conn) == before
        assert "The selection changed" in view.confirm_text.value and "<b>3</b>" in view.confirm_text.value
        view.confirm_remove_button.click()
        assert view.results == {ids[0]: "removed", ids[2]: "removed", ids[3]: "removed"}
        assert conn.client.zrange(f"emq:{{{Q}}}:dead", 0, -1) == [ids[1]]
        assert not conn.client.exists(f"emq:{{{Q}}}:job:{ids[0]}")
        assert not view.confirming


def test_filter_by_error_and_payload_glob(conn):
    smtp = dead(conn, Q, 3, error="SMTP 550")
    dns = dead(conn, Q, 2, error="DNS timeout", start=3)
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        view.order.value = "oldest"  # the page in id order
        view.error_glob.value = "DNS *"
        view.filter_button.click()
        assert view.frame.index.tolist() == dns
        assert view.page_label.value.startswith("matches 1–2 of 2 · ")
        view.error_glob.value = ""
        view.payload_glob.value = '{"n": [12]}'
        view.filter_button.click()
        assert view.frame.index.tolist() == smtp[1:]
        view.error_glob.value = "dns*"  # case-sensitive, whole field
        view.payload_glob.value = ""
        view.filter_button.click()
        assert view.frame.empty and view.page_label.value.startswith("no dead job matches")
        view.clear_button.click()
        assert view.frame.index.tolist() == smtp + dns
        view.error_glob.value = "DNS *"
        view.filter_button.click()
        view.grid.select(1, 0)
        view.reprocess_button.click()  # the row of the filtered page
        assert view.results == {dns[1]: "reprocessed"}


def test_a_row_click_opens_the_job_panel_in_the_job_tab(conn):
    ids = dead(conn, Q, 3)
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        view.order.value = "oldest"  # the page in id order
        click(view.grid, 2, column="last_error")
        panel = d.parts["Job"]
        assert isinstance(panel, JobPanel) and panel.job_id == ids[2]
        assert d.tabs.titles[2] == f"Job {ids[2]}" and d.tabs.selected_index == 1  # Jobs stays
        assert panel.row["last_error"] == "SMTP 550 user2"
        click(view.grid, 0)
        assert d.parts["Job"].job_id == ids[0] and panel.comm is None  # replaced
        # a header click (a sort) opens nothing
        view.grid._handle_custom_msg(
            {
                "event_type": "cell-click",
                "region": "column-header",
                "column": "state",
                "column_index": 0,
                "row": 0,
                "primary_key_row": 0,
                "cell_value": "state",
            },
            [],
        )
        assert d.parts["Job"].job_id == ids[0]
        d.parts["Job"].reprocess_button.click()
        assert conn.client.zscore(f"emq:{{{Q}}}:pending", ids[0]) is not None


def test_lanes_and_repeatables_tabs_act(conn):
    for g in ("acme", "globex"):
        jobs.enqueue(conn, Q, "{}", group=g)
    repeat.register(conn, Q, "nightly", 86_400_000, '{"report": 1}')
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Lanes")
        assert view.frame.index.tolist() == ["acme", "globex"]
        click(view.grid, 1, column="pending")
        assert view.lane.value == "globex"
        view.pause_button.click()
        assert lanes.lanes(conn, Q)["globex"]["paused"] and not lanes.lanes(conn, Q)["acme"]["paused"]
        view.limit.value = 3
        view.limit_button.click()
        assert lanes.lanes(conn, Q)["globex"]["limit"] == 3
        assert view.grid.data.loc["globex", "paused"] == "yes"
        reps = d.tab("Repeatables")
        assert reps.frame.index.tolist() == ["nightly"] and reps.frame.loc["nightly", "every"] == "1d"
        reps.name.value = "nightly"
        reps.run_button.click()
        assert conn.client.zcard(f"emq:{{{Q}}}:pending") == 1


def test_overview_tab_pauses_and_its_drain_holds_the_refresh(conn):
    for i in range(3):
        jobs.enqueue(conn, Q, str(i))
    with opened(conn, refresh_every=0.5, queue=Q) as d:
        panel = d.parts["Overview"]
        panel.pause_button.click()
        assert conn.client.hget(f"emq:{{{Q}}}:meta", "paused") == "1"
        assert until(lambda: d.grid.data.loc[Q, "state"] == "paused")  # the loop saw it
        panel.drain_button.click()  # a confirmation opens
        assert d.confirming
        assert until(lambda: "waits while a confirmation is open" in d.updated.value)
        held = d.refreshes
        jobs.enqueue(conn, Q, "late")
        time.sleep(1.2)  # two intervals
        assert d.refreshes == held and "Drain <b>3</b>" in panel.confirm_text.value
        panel.cancel_button.click()
        assert until(lambda: d.refreshes > held and d.grid.data.loc[Q, "pending"] == 4)
        assert until(lambda: "updated" in d.updated.value and "every 0.5 s" in d.updated.value)


def test_read_only_greys_every_writing_button_and_refuses_before_io(conn, backend, request):
    dead(conn, Q, 2)
    jobs.enqueue(conn, Q, "{}", group="acme")
    srv = request.getfixturevalue("valkey") if backend == "valkey" else None
    url = f"redis://127.0.0.1:{srv.port}/0" if srv else None
    ro = (
        emq.connect(url, read_only=True, env="production")
        if url
        else emq.connect(embedded="fake", read_only=True, env="production")
    )
    with opened(ro, auto=False, queue=Q) as d:
        assert "production</span>" in d.heading.value and "read-only</span>" in d.heading.value
        assert "#cf222e" in d.heading.value
        overview, view = d.parts["Overview"], d.tab("Jobs")
        lane_view, deadp = d.tab("Lanes"), d.tab("Dead letters")
        click(view.grid, 0)
        job = d.parts["Job"]
        for b in (
            overview.pause_button,
            overview.drain_button,
            view.reprocess_button,
            view.remove_button,
            view.confirm_remove_button,
            lane_view.pause_button,
            lane_view.limit_button,
            job.remove_button,
            job.reprocess_button,
            d.tab("Repeatables").run_button,
            deadp.reprocess_button,
            deadp.remove_button,
        ):
            assert b.disabled, b.description
        before = dump(conn)
        view.grid.select(0, 0)
        view.reprocess_selected()  # a click that got through anyway
        assert view.status_text.startswith("ReadOnly: reprocess writes")
        lane_view.lane.value = "acme"
        lane_view.pause()
        assert "read-only session" in lane_view.status_text
        overview.toggle_pause()
        assert "read-only session" in overview.status_text
        assert dump(conn) == before


def emq_threads():
    return {t for t in threading.enumerate() if t.name.startswith("emq-")}


def test_rebuilding_the_dashboard_ten_times_leaves_one_loop(conn):
    dead(conn, Q, 2)
    before = set(threading.enumerate())
    for _ in range(10):
        d = Dashboard(conn, refresh_every=0.5, queue=Q)
        d.tab("Events")
    extra = set(threading.enumerate()) - before
    assert sorted(t.name for t in extra) == ["emq-dashboard-refresh", f"emq-events-{Q}"]
    assert [p for p in live_panels() if isinstance(p, Dashboard)] == [d]
    jobs.enqueue(conn, "later", "{}")
    assert until(lambda: "later" in d.overview.index)  # the last one still refreshes
    d.close()
    assert set(threading.enumerate()) - before == set()
    assert not [p for p in live_panels() if isinstance(p, Dashboard)]


def test_the_magic_opens_the_dashboard_with_the_configured_interval(conn, ip):
    from emq_notebook import magics

    dead(conn, Q, 1)
    magics.SESSION.conn = conn
    ip.run_line_magic("config", "EMQMagics.refresh_s = 3.0")
    try:
        d = ip.run_line_magic("emq", f"dashboard {Q}")
        assert isinstance(d, Dashboard) and d.conn is conn and d.q == Q
        assert d.refresh_every == 3.0 and "every 3 s" in d.auto.description
        d.close()
    finally:
        ip.run_line_magic("config", "EMQMagics.refresh_s = 2.0")


# -- what opening it costs -----------------------------------------------------------
BIG = "big"
N = 100_000


class Commands:
    """Every command one connection's client sends (pipelined ones counted one by one),
    and each transition run with the ids it carried."""

    def __init__(self, conn: Connection, monkeypatch):
        self.sent: list[tuple] = []
        self.runs: list[tuple[str, int]] = []
        self.args: list[list] = []
        pool = conn.client.connection_pool
        plain, batch, run = redis.Redis.execute_command, redis.client.Pipeline.execute, Connection.run

        def execute_command(client, *args, **kw):
            if client.connection_pool is pool:
                self.sent.append(args)
            return plain(client, *args, **kw)

        def execute(pipe, *args, **kw):
            if pipe.connection_pool is pool:
                self.sent.extend(c[0] for c in pipe.command_stack)
            return batch(pipe, *args, **kw)

        def counted_run(c, name, keys, args=(), **kw):
            if c.client.connection_pool is pool:
                self.runs.append((name, len(args)))
                self.args.append(list(args))
            return run(c, name, keys, args, **kw)

        monkeypatch.setattr(redis.Redis, "execute_command", execute_command)
        monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
        monkeypatch.setattr(Connection, "run", counted_run)

    def names(self) -> list[str]:
        return [str(c[0]).upper() for c in self.sent]

    def take(self) -> tuple[list[tuple], list[tuple[str, int]]]:
        sent, runs = self.sent, self.runs
        self.sent, self.runs, self.args = [], [], []
        return sent, runs


ROW = """
local base, first, last = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('HSETNX', base .. 'meta', 'created_at', '1')
for i = first, last do
  local id = string.format('j_%06d', i)
  redis.call('HSET', base .. 'job:' .. id, 'payload', '{"n":' .. i .. '}', 'state', 'dead',
    'attempts', '1', 'failures', '1', 'stalled', '0', 'max_attempts', '1', 'priority', '0',
    'last_error', 'SMTP 550', 'created_at', '1')
  redis.call('ZADD', base .. 'dead', 1000 + i, id)
end
"""


def big_queue(conn, backend):
    """100,000 dead jobs. On the real Valkey every job has its row; the fake writes hashes
    about eight times slower, so there only the first 2,000 have rows and the rest are
    members of the dead set (what the dashboard may touch is counted by the ids it asks
    for, whether their rows exist or not)."""
    rows = N if backend != "fake" else 2_000
    for first in range(1, rows + 1, 20_000):
        conn.client.eval(ROW, 1, f"emq:{{{BIG}}}:", first, min(rows, first + 19_999))
    pipe = conn.client.pipeline(transaction=False)
    for first in range(rows + 1, N + 1, 10_000):
        last = min(N, first + 9_999)
        pipe.zadd(f"emq:{{{BIG}}}:dead", {f"j_{i:06d}": 1000 + i for i in range(first, last + 1)})
    pipe.execute()
    assert conn.client.zcard(f"emq:{{{BIG}}}:dead") == N


def test_opening_on_a_100000_job_queue_reads_counts_then_one_page(conn, backend, monkeypatch):
    big_queue(conn, backend)
    keys = conn.client.dbsize()
    spy = Commands(conn, monkeypatch)
    if backend == "valkey":
        conn.client.config_resetstat()
        spy.take()
    with opened(conn, auto=False) as d:
        sent, runs = spy.take()
        names = [str(c[0]).upper() for c in sent]
        scans = names.count("SCAN")
        # finding the queues walks the keyspace in SCAN steps of 1,000; the rest is a few counts
        # (and frames.health's fixed reads of the queue's metrics)
        assert scans <= keys // 1000 + 2
        assert len(names) - scans <= 20 + 12, names
        # one script: the look's `@read_watch` of the queue (counts, ids and scores, no row)
        assert [r[0] for r in runs] == ["read_watch"] and "HGETALL" not in names
        assert [c for c in sent if any(":job:" in str(part) for part in c)] == []  # no row read
        if backend == "valkey":
            stats = conn.client.info("commandstats")
            assert not {"cmdstat_hgetall"} & set(stats)
            # the server read no row: any HMGET was of a metrics hash, one a queue
            assert stats.get("cmdstat_hmget", {"calls": 0})["calls"] <= 3
        assert d.overview.loc[BIG, "dead"] == N

        d.open_queue(BIG)  # the Overview tab: one queue's counts (one `@read_watch` call)
        sent, runs = spy.take()
        assert len(sent) <= 20 and [r[0] for r in runs] == ["read_watch"], sent

        view = d.tab("Jobs")  # one page of rows: the newest deaths, in the server's order
        asked = list(spy.args)
        sent, runs = spy.take()
        # the page's ids (one bounded call from its place in the order), then their rows
        assert [n for n, _ in runs] == ["read_dead_page", "read_rows"]
        assert asked[0][:4] == ["dead", "time", 0, 100]
        assert len(sent) <= 10
        assert view.page_label.value == "rows 1–100 of 100,000 dead"
        assert view.frame.index.tolist() == [f"j_{i:06d}" for i in range(N, N - 100, -1)]
        view.next_button.click()  # from where the page ended: no re-read from the start
        asked = list(spy.args)
        sent, runs = spy.take()
        assert [n for n, _ in runs] == ["read_dead_page", "read_rows"] and asked[0][2] == 100
        assert view.frame.index.tolist() == [f"j_{i:06d}" for i in range(N - 100, N - 200, -1)]
        assert view.page_label.value == "rows 101–200 of 100,000 dead"
        view.last_button.click()  # the oldest deaths: one call, as at the start
        asked = list(spy.args)
        sent, runs = spy.take()
        assert [n for n, _ in runs] == ["read_dead_page", "read_rows"] and asked[0][2] == N - 100
        assert view.frame.index.tolist() == [f"j_{i:06d}" for i in range(100, 0, -1)]
        assert view.page_label.value == "rows 99,901–100,000 of 100,000 dead"
        view.prev_button.click()  # a page back from the last
        assert spy.args[0][2] == N - 200 and view.frame.index[0] == "j_000200"


# -- the demo page's staging ---------------------------------------------------------
def test_the_demo_stages_only_on_an_empty_server(conn):
    from emq_notebook import demo
    from emq_notebook.errors import UsageProblem

    jobs.enqueue(conn, "someone-elses", "{}")
    before = dump(conn)
    with pytest.raises(UsageProblem, match="already holds 1 queues"):
        demo.stage_dashboard(conn)
    assert dump(conn) == before
    conn.client.flushall()
    assert demo.stage_dashboard(conn) == ["mailers", "reports", "thumbnails"]
    c = frames.counts(conn)
    assert c.loc["mailers", ["pending", "active", "dead"]].tolist() == [1_204, 6, 24]
    assert bool(c.loc["reports", "paused"]) and c.loc["reports", "lanes"] == 2
    assert c.loc["thumbnails", "schedule"] == 12


# -- the parts other modules bring: health, triage, plots -----------------------------
def test_verdicts_from_health_colour_the_overview(conn, stage, monkeypatch):
    import pandas as pd

    def look(c, queues=None, **kw):
        # every queue's verdicts and the counts read with them, in one look
        assert c is conn and queues is None
        verdicts = pd.DataFrame(
            {
                "verdict": ["paused", "failing"],
                "why": ["paused by an operator", "3 of 3 failed in 5 minutes"],
            },
            index=pd.Index(["reports", "mail"], name="queue"),
        )
        return watching.Look(verdicts, {}, frames.counts(c))

    monkeypatch.setattr(health_module, "look", look)
    d = Dashboard(conn, auto=False)
    assert list(d.overview.index) == ["reports", "mail"]  # in the health frame's order
    shown = d.grid.data
    assert shown.loc[["reports", "mail"], "#"].tolist() == [1, 2]
    assert shown.loc["mail", "verdict"] == health_module.SEVERITY.index("failing")
    # what is read first, then the counts, the rarely-used columns last
    assert list(shown.columns) == [
        "verdict",
        "queue",
        "why",
        "pending",
        "active",
        "schedule",
        "dead",
        "state",
        "#",
        "lanes",
        "repeatables",
    ]
    assert d.grid.header_visibility == "column"  # the queue is a column, after the verdict
    assert d.grid.renderers["why"].text_wrap  # read whole: wrapped onto the row's two lines
    colours = d.grid.renderers["verdict"].background_color.value
    assert colours.startswith("['#ffcecb', '#ffd8b5'") and colours.endswith("[cell.value]")
    assert "'failing', 'stuck', 'growing', 'dead letters'" in d.grid.renderers["verdict"].text_value.value
    assert len(set(VERDICT_COLOURS.values())) == len(VERDICT_COLOURS)  # one colour a verdict
    text = d.static_text()
    assert "paused | reports | paused by an operator | 1 | 0 | 1 | 0 | paused | 1 |" in text
    assert "failing | mail | 3 of 3 failed in 5 minutes | 2 | 0 | 0 | 3 | running | 2 |" in text
    assert text.index("| reports |") < text.index("| mail |")
    d.close()


def test_find_filters_on_the_server_and_bulk_reprocess_is_used(conn, monkeypatch):
    ids = dead(conn, Q, 4)
    calls = []

    def find(c, q, **kw):
        calls.append(("find", q, kw))
        return real_find(c, q, **kw)

    def reprocess_jobs(c, q, chosen):
        calls.append(("bulk", list(chosen)))
        return real_reprocess(c, q, chosen)

    real_find, real_reprocess = triage.find, admin.reprocess_jobs
    monkeypatch.setattr(triage, "find", find)
    monkeypatch.setattr(admin, "reprocess_jobs", reprocess_jobs)
    d = Dashboard(conn, auto=False, queue=Q)
    view = d.tab("Jobs")
    view.payload_glob.value = '{"n": [13]}'
    view.filter_button.click()
    asked = {"state": "dead", "error": None, "payload": '{"n": [13]}', "limit": 100, "after": None}
    # the page (the unfiltered one was the server's order: no find); no place after it
    assert calls == [("find", Q, asked)]
    assert view.frame.index.tolist() == [ids[1], ids[3]]
    assert view.page_label.value == "matches 1–2 of 2 · found on the server"
    select(view.grid, (1, 1))
    view.reprocess_button.click()
    assert calls[1] == ("bulk", [ids[3]]) and view.results == {ids[3]: "reprocessed"}
    assert calls[2][0] == "find" and calls[2][2]["after"] is None  # the filtered page read again
    assert view.frame.index.tolist() == [ids[1]]
    d.close()


def test_the_throughput_plot_shows_on_the_overview_tab(conn):
    jobs.enqueue(conn, Q, "{}")
    d = Dashboard(conn, auto=False, queue=Q)
    assert d.plot.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert d.tabs.children[0].children[-1] is d.plot
    d.close()


# -- refresh in place, while someone looks ----------------------------------------------
def live_widgets() -> int:
    import warnings

    import ipywidgets

    with warnings.catch_warnings():  # ipywidgets 8 deprecates the name, not the count
        warnings.simplefilter("ignore", DeprecationWarning)
        return len(ipywidgets.Widget.widgets)


def test_a_thousand_refreshes_with_moving_counts_make_no_widget_and_keep_the_view(conn, monkeypatch):
    for q in ("alpha", "beta", "gamma"):
        jobs.enqueue(conn, q, "{}")
    # the verdicts judged once (health's own reads are tested in test_health*): each
    # refresh reads the counts from the server and orders the queues by severity and size
    judged = frames.health(conn)[["verdict", "why"]]
    monkeypatch.setattr(frames, "health", lambda c, counts: health_module.by_severity(counts.join(judged)))
    with opened(conn, auto=False, queue="beta") as d:
        d.tab("Lanes")
        d.tab("Overview")
        d.grid.transform([{"type": "sort", "column": "pending", "desc": True}])  # the browser's sort
        data, messages = d.grid._data, []
        writer = grids.writer()
        monkeypatch.setattr(writer, "send", messages.append)
        before, changed = live_widgets(), []
        for i in range(1_000):
            jobs.enqueue(conn, ("alpha", "gamma")[i % 2], "{}")  # one queue's counts move a refresh
            was = d.shown_frame
            d.refresh()
            moved = (was.to_numpy() != d.shown_frame.to_numpy()).any(axis=1)
            changed.append([row for row, m in enumerate(moved) if m])
        assert live_widgets() == before
        assert d.refreshes >= 1_000 and d.grid.data.loc["alpha", "pending"] == 501
        # every refresh sent the rows that changed, no other, in one message, patched in
        # place: the browser keeps its scroll, sort and selection
        assert d.grid._data is data and all(m["grid"] == d.grid.model_id for m in messages)
        assert [[row for row, _, _ in m["rows"]] for m in messages] == [rows for rows in changed if rows]
        assert len(messages) >= 1_000
        # the highlight is the open queue's row where the sort puts it (the least pending)
        assert d.grid.selections == [{"r1": 2, "c1": 0, "r2": 2, "c2": len(d.shown_frame.columns) - 1}]
        assert d.grid._transforms == [{"type": "sort", "column": "pending", "desc": True}]
        assert "pending <b>1</b>" in d.parts["Overview"].counts.value


def test_a_refresh_that_changed_nothing_sends_no_grid_message(conn, monkeypatch):
    """Issue 43 item 1: the page repainted the grid at every refresh. A refresh whose
    counts and reasons are the same sends nothing to the grid or its row writer, and
    one that changed a queue sends that queue's row alone."""
    import ipywidgets

    for q in ("alpha", "beta", "gamma"):
        jobs.enqueue(conn, q, "{}", delay_ms=3_600_000)  # idle: nothing moves by itself
    with opened(conn, auto=False, queue="beta") as d:
        d.refresh()
        sent: list = []
        real = ipywidgets.Widget._send

        def counted(self, msg, buffers=None):
            sent.append((self, msg))
            return real(self, msg, buffers)

        monkeypatch.setattr(ipywidgets.Widget, "_send", counted)
        for _ in range(3):
            d.refresh()
        grid_side = [m for who, m in sent if who is d.grid or who is grids.writer()]
        assert grid_side == []
        assert {who for who, _ in sent} <= {d.updated}  # the freshness line alone
        jobs.enqueue(conn, "alpha", "{}", delay_ms=3_600_000)  # one queue's counts move, its rank kept
        d.refresh()
        written = [m for who, m in sent if who is grids.writer()]
        assert [who for who, _ in sent if who is d.grid] == []  # no data replaced, no reset
        assert len(written) == 1
        (message,) = [m["content"] for m in written]
        assert [row for row, _, _ in message["rows"]] == [list(d.shown_frame.index).index("alpha")]


def test_a_refresh_keeps_an_open_confirmation(conn):
    ids = dead(conn, Q, 3)
    with opened(conn, auto=False, queue=Q) as d:
        view = d.tab("Jobs")
        view.order.value = "oldest"  # the page in id order
        select(view.grid, (0, 1))
        view.remove_button.click()
        d.refresh()
        assert view.confirming and "Remove <b>2</b>" in view.confirm_text.value
        view.confirm_remove_button.click()
        assert view.results == {ids[0]: "removed", ids[1]: "removed"}


def test_auto_refresh_pauses_while_nobody_looks_and_after_idle_minutes(conn, monkeypatch):
    from emq_notebook.widgets import dashboard as module

    jobs.enqueue(conn, Q, "{}")
    with opened(conn, refresh_every=0.5) as d:
        assert until(lambda: d.refreshes >= 2)
        d.presence.visible = False  # the tab hidden, or the dashboard scrolled away
        time.sleep(0.3)
        held = d.refreshes
        time.sleep(1.2)
        assert d.refreshes == held and d.running
        d.presence.visible = True
        assert until(lambda: d.refreshes > held)
        monkeypatch.setattr(module, "IDLE_S", 0.5)  # nobody touched it for "30 minutes"
        d.touched_at = time.monotonic() - 1
        assert until(lambda: d.resume_button.layout.display == "flex")
        assert "paused after" in d.updated.value
        held = d.refreshes
        time.sleep(1.2)
        assert d.refreshes == held
        d.resume_button.click()
        assert d.refreshes == held + 1 and d.resume_button.layout.display == "none"
        d.presence.touched += 1  # the browser saw a click: the idle clock starts again
        assert time.monotonic() - d.touched_at < 0.5


def test_a_page_that_died_without_its_unload_leaves_a_kernel_that_publishes_nothing(conn, monkeypatch):
    import ipywidgets

    jobs.enqueue(conn, Q, "{}")
    with opened(conn, auto=False, queue=Q) as d:
        events = d.tab("Events")
        d.presence.beat += 1  # the page's first beat: a browser shows the dashboard
        d.updated_at = None
        d._tick()
        held = d.refreshes
        assert d.presence.seen and events.running
        d.presence.heard_at -= 3600  # no beat since: the tab died without its unload step
        assert d.presence.lost and not d.presence.seen
        d._tick()
        assert not events.running and d.events_held  # the tail stopped too
        sent: list = []
        monkeypatch.setattr(ipywidgets.Widget, "_send", lambda self, msg, buffers=None: sent.append(msg))
        for _ in range(3):  # counts that move and events that flow: nothing published
            jobs.enqueue(conn, Q, "{}")
            d.updated_at = None
            d._tick()
        assert sent == [] and d.refreshes == held
        d.presence.beat += 1  # heard again (a laptop woke up): all of it resumes
        d._tick()
        assert d.refreshes == held + 1 and events.running and not d.events_held


def test_a_page_is_not_lost_while_a_cell_runs_or_without_a_browser(conn, monkeypatch):
    from emq_notebook.widgets import presence

    monkeypatch.setattr(presence._Cells, "running", False)
    monkeypatch.setattr(presence._Cells, "ended_at", 0.0)
    with opened(conn, auto=False) as d:
        assert d.presence.heard_at is None and not d.presence.lost  # nbval, a test: no page
        d.presence.beat += 1
        d.presence.heard_at -= 3600
        assert d.presence.lost
        presence._Cells._started(None)  # a cell runs: the page's beats wait in the queue
        assert not d.presence.lost
        presence._Cells._ended(None)  # they are read once it ends
        assert not d.presence.lost


def test_the_name_filter_shows_the_matching_queues(conn):
    for q in ("mail-eu", "mail-us", "reports"):
        jobs.enqueue(conn, q, "{}")
    with opened(conn, auto=False) as d:
        d.name_filter.value = "MAIL"
        assert list(d.grid.data.index) == ["mail-eu", "mail-us"]
        assert "2 of 3 queues match “MAIL”" in d.shown_line.value
        d.refresh()
        assert list(d.grid.data.index) == ["mail-eu", "mail-us"]
        assert "mail-eu |" in d.static_text() and "reports |" not in d.static_text()
        d.name_filter.value = ""
        assert len(d.grid.data) == 3


def test_a_verdict_chip_toggles_a_filter_of_the_overview_combined_with_the_name_filter(conn):
    """Issue 43 item 3: "3 failing" is a button; on, the overview shows those queues only."""
    for q in ("mail-eu", "mail-us", "reports", "thumbs"):
        jobs.enqueue(conn, q, "{}")
    dead(conn, "mail-eu", 2)  # failing
    dead(conn, "reports", 1)  # failing
    admin.pause(conn, "thumbs")
    with opened(conn, auto=False) as d:
        chips = d.verdict_chips
        assert chips["failing"].description == "2 failing" and chips["failing"].layout.display == "flex"
        assert chips["paused"].description == "1 paused"
        assert chips["stuck"].layout.display == "none"  # no stuck queue: no chip
        chips["failing"].click()
        assert d.verdicts_on == ["failing"] and chips["failing"].icon == "check"
        assert list(d.grid.data.index) == ["mail-eu", "reports"]
        assert "2 of 4 queues match failing" in d.shown_line.value
        chips["paused"].click()  # two chips on: either verdict
        assert list(d.grid.data.index) == ["mail-eu", "reports", "thumbs"]
        d.name_filter.value = "mail"  # and the name
        assert list(d.grid.data.index) == ["mail-eu"]
        assert "1 of 4 queues match “mail” and failing and paused" in d.shown_line.value
        d.refresh()  # a refresh keeps the filters
        assert list(d.grid.data.index) == ["mail-eu"]
        chips["failing"].click()
        chips["paused"].click()  # all off: every queue the name lets through
        assert d.verdicts_on == [] and chips["failing"].icon == ""
        assert list(d.grid.data.index) == ["mail-eu", "mail-us"]
        d.name_filter.value = ""
        assert len(d.grid.data) == 4 and "all 4 shown" in d.shown_line.value


def test_a_chip_on_stays_shown_when_its_last_queue_leaves_the_verdict(conn):
    jobs.enqueue(conn, "thumbs", "{}")
    admin.pause(conn, "thumbs")
    with opened(conn, auto=False) as d:
        d.verdict_chips["paused"].click()
        assert list(d.grid.data.index) == ["thumbs"]
        admin.resume(conn, "thumbs")
        d.refresh()
        chip = d.verdict_chips["paused"]
        assert chip.description == "0 paused" and chip.layout.display == "flex"  # can be switched off
        assert len(d.grid.data) == 0
        chip.click()
        assert chip.layout.display == "flex" or d.verdicts_on == []
        d.refresh()
        assert chip.layout.display == "none" and list(d.grid.data.index) == ["thumbs"]


def test_the_queue_picker_searches_and_opens_only_a_whole_name(conn):
    for q in ("mail", "mailers", "reports"):
        jobs.enqueue(conn, q, "{}")
    with opened(conn, auto=False) as d:
        assert isinstance(d.picker, __import__("ipywidgets").Combobox)
        assert list(d.picker.options) == ["mail", "mailers", "reports"]
        d.picker.value = "mai"  # typing: part of a name opens nothing
        assert d.q is None
        d.picker.value = "mail"
        assert d.q == "mail"
        d.picker.value = "mailers"
        assert d.q == "mailers"
        click(d.grid, list(d.shown_frame.index).index("reports"))
        assert d.q == "reports" and d.picker.value == "reports"  # the box says the open queue


def test_hostile_queue_keys_stay_out_and_the_longest_name_opens_from_the_picker(conn):
    """Keys another node wrote with HTML or bytes that are not UTF-8 in the name are no
    queue (the name gate): no chip, row or option; a 128-character name is one."""
    longest = "q.-@+_" + "x" * 122
    jobs.enqueue(conn, longest, "{}")
    for name in (b"<img src=x onerror=alert(1)>", b"bad\xff\xfename", b"a" * 2_000):
        conn.client.hset(b"emq:{" + name + b"}:meta", "created_at", "1")
        conn.client.zadd(b"emq:{" + name + b"}:pending", {b"j1": 1})
    frames.queues(conn, rescan=True)
    with opened(conn, auto=False) as d:
        assert list(d.overview.index) == [longest] and list(d.picker.options) == [longest]
        assert "<img" not in d.summary.value + d.shown_line.value
        assert d.verdict_chips["growing"].description == "1 growing"
        d.picker.value = longest
        assert d.q == longest and printable(longest) in d.queue_title.value


# -- one guard, actions where they apply, paging from a place --------------------------------
def test_jobs_actions_apply_where_they_mean_something_and_only_with_a_selection(conn):
    dead(conn, Q, 2)
    jobs.enqueue(conn, Q, "{}")
    view = JobsView(conn, Q, state="dead")
    try:
        assert view.reprocess_button.disabled and view.remove_button.disabled  # nothing selected
        select(view.grid, (0, 0))  # as the browser syncs it
        assert not view.reprocess_button.disabled and not view.remove_button.disabled
        view.state.value = "pending"
        assert view.reprocess_button.layout.display == "none"  # no reprocess of pending jobs
        assert view.remove_button.layout.display == "flex"
        view.state.value = "active"
        assert view.remove_button.layout.display == "none"  # a job in flight is its worker's
    finally:
        view.close()


def test_reprocess_above_confirm_above_asks_naming_count_and_connection(conn):
    ids = dead(conn, Q, 5)
    view = JobsView(conn, Q, state="dead", confirm_above=3)
    view.order.value = "oldest"  # the page in id order
    try:
        view.grid.select(0, 0, 3, 0)
        assert view.reprocess_selected() is None  # 4 > 3: asked, nothing moved
        assert "Reprocess <b>4</b> selected dead jobs of mail" in view.confirm_text.value
        assert "env not set · connected: " in view.confirm_text.value
        assert conn.client.zcard(f"emq:{{{Q}}}:dead") == 5
        view.confirm_remove_button.click()
        assert view.results == {i: "reprocessed" for i in ids[:4]}
        view.grid.select(0, 0)
        assert view.reprocess_selected() == {ids[4]: "reprocessed"}  # 1: at once
    finally:
        view.close()


def test_a_filtered_view_pages_from_its_place_and_counts_all_on_request(conn, monkeypatch):
    for i in range(25):
        jobs.enqueue(conn, Q, f'{{"n": {i}, "kind": "{"a" if i % 2 else "b"}"}}', id=f"j_{i:04d}")
    seen = []
    real = triage.find
    monkeypatch.setattr(
        triage, "find", lambda c, q, **kw: (seen.append(kw.get("after")), real(c, q, **kw))[1]
    )
    view = JobsView(conn, Q, state="pending", page=5)
    try:
        view.payload_glob.value = '*"a"*'
        view.filter_button.click()
        odd = [f"j_{i:04d}" for i in range(1, 25, 2)]
        assert view.frame.index.tolist() == odd[:5]
        assert view.page_label.value == "matches 1–5 of at least 6 · found on the server"
        assert view.count_button.layout.display == "flex"
        seen.clear()
        view.next_button.click()
        assert view.frame.index.tolist() == odd[5:10]
        # after page 1's last row (in a state's own set: no page of lanes)
        assert seen[0] == ("pending", f"emq:{{{Q}}}:pending", "0", odd[4], "")
        view.count_button.click()
        assert view.counted == 12 and view.page_label.value == "matches 6–10 of 12 · found on the server"
        view.next_button.click()
        assert view.frame.index.tolist() == odd[10:] and view.next_button.disabled
        view.prev_button.click()
        view.prev_button.click()
        assert view.frame.index.tolist() == odd[:5] and view.prev_button.disabled
    finally:
        view.close()


def test_the_dashboard_magic_asks_above_the_sessions_confirm_above(ip, conn):
    url = "--embedded fake" if conn.label.startswith("embedded") else conn.label
    ip.run_line_magic("emq", f"connect {url} --name dash-confirm")
    ip.run_line_magic("config", "EMQMagics.confirm_above = 3")
    try:
        d = ip.run_line_magic("emq", "dashboard")
        assert isinstance(d, Dashboard) and d.confirm_above == 3
        d.close()
    finally:
        ip.run_line_magic("config", "EMQMagics.confirm_above = 1000")


def test_every_changed_row_of_a_patch_is_written_in_one_message_the_data_kept(monkeypatch):
    """ipydatagrid's own row message redraws the whole grid for each row, and its data
    replacement scrolls the browser back to the top: a patch sends the changed rows
    together (their row, id and shown values) and keeps the grid's data."""
    import pandas as pd

    frame = pd.DataFrame(
        {"pending": range(30), "why": ["x"] * 30},
        index=pd.Index([f"q{i:02d}" for i in range(30)], name="queue"),
    )
    g = grids.grid(frame)
    writer = grids.writer()  # one a kernel, made with the first grid
    assert grids.grid(frame) is not g and grids.writer() is writer
    data, messages, rowwise = g._data, [], []
    monkeypatch.setattr(grids.writer(), "send", messages.append)
    g._notify_row_change = lambda row, values: rowwise.append(row)
    every = frame.assign(pending=frame["pending"] + 1)  # every row moved
    assert grids.patch(g, every) and g._data is data and rowwise == []
    assert len(messages) == 1 and messages[0]["grid"] == g.model_id
    assert messages[0]["key"] == "queue" and messages[0]["columns"] == ["pending", "why"]
    assert messages[0]["rows"] == [(i, f"q{i:02d}", [i + 1, "x"]) for i in range(30)]
    assert g.data["pending"].tolist() == list(range(1, 31))
    assert grids.patch(g, every) and len(messages) == 1  # nothing changed: nothing sent
    one = every.assign(why=["x"] * 29 + ["y"])
    assert grids.patch(g, one) and messages[1]["rows"] == [(29, "q29", [30, "y"])]


def test_without_the_row_writer_many_changed_rows_are_one_replacement_and_a_few_a_message_each(
    monkeypatch,
):
    import pandas as pd

    monkeypatch.setattr(grids, "writer", lambda: None)  # a kernel without anywidget
    frame = pd.DataFrame(
        {"pending": range(30)}, index=pd.Index([f"q{i:02d}" for i in range(30)], name="queue")
    )
    g = grids.grid(frame)
    sent = []
    g._notify_row_change = lambda row, values: sent.append(row)
    few = frame.assign(pending=[n + (1 if n < grids.PATCH_MOST else 0) for n in frame["pending"]])
    assert grids.patch(g, few) and sent == list(range(grids.PATCH_MOST))
    data = g._data
    many = few.assign(pending=few["pending"] + 1)  # every row moved
    assert not grids.patch(g, many) and len(sent) == grids.PATCH_MOST
    assert g._data is not data and g.data["pending"].tolist() == many["pending"].tolist()
    assert grids.patch(g, many) and len(sent) == grids.PATCH_MOST  # nothing changed: nothing sent
