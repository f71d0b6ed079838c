"""JobsView (emq_notebook/widgets/job_grid.py) and its detail pane, on both backends:
the dead set paged newest first in the server's order, a row click showing the job whole
in the viewer's zone, hostile rows shown whole and escaped, a job gone between the page
and the click said gone."""

import html

from helpers import failed
from panels import unsendable

from emq_notebook import jobs
from emq_notebook.widgets import DeadLetterPanel

Q = "mail"


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


# -- the dead set newest first, a job read whole


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
    from dead_letters import hundred_thousand_dead

    from emq_notebook import connector
    from emq_notebook.widgets.job_grid import JobsView

    q, n = "deadpage", 100_000
    ids = hundred_thousand_dead(conn, q, n)
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
