"""Values as an operator reads them in a panel (emq_notebook/widgets/values.py), on both
backends: whole ids, times in the viewer's zone with its name, whole numbers thousands
separated, across the panels that show them; text another node wrote as a time is no time."""

from helpers import failed

from emq_notebook import jobs
from emq_notebook.widgets import DeadLetterPanel, JobPanel

Q = "mail"


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
