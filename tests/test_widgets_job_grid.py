"""JobsView (emq_notebook/widgets/job_grid.py) and its detail pane, on both backends:
hostile rows shown whole and escaped, a job gone between the page and the click said gone.
(Its pages of the dead set: test_widgets.py.)"""

import html

from helpers import failed
from panels import unsendable

from emq_notebook import jobs
from emq_notebook.widgets import (
    DeadLetterPanel,
)

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
