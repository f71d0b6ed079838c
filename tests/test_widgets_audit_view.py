"""The dashboard's Audit tab (`widgets.AuditView`), on both backends: the entries
newest first, filtered by verb and by who, Refresh reading them again, read-only."""

from __future__ import annotations

import emq_notebook as emq
from emq_notebook import admin, audit
from emq_notebook.widgets import values
from emq_notebook.widgets.audit_view import ALL, AuditView

Q = "mailers"


def test_the_audit_view_shows_the_entries_newest_first_and_filters_them(conn, monkeypatch):
    admin.pause(conn, Q)
    monkeypatch.setenv("JUPYTERHUB_USER", "jane")
    with audit.because("bounce storm"):
        admin.resume(conn, Q)
    view = AuditView(conn, Q)
    assert list(view.shown().verb) == ["resume", "pause"]
    assert view.table.value.index("resume") < view.table.value.index("pause")
    assert "bounce storm" in view.table.value and "<td>0</td>" in view.table.value
    # a time reads in the viewer's zone, named
    assert f"<td>{values.when(view.entries.time.iloc[0])}</td>" in view.table.value
    assert set(view.who.options) == {ALL, "jane", view.entries.who.iloc[1]}
    view.who.value = "jane"
    assert list(view.shown().verb) == ["resume"] and "1 of 2 entries" in view.status_text
    view.who.value = ALL
    view.verb.value = "pause"
    assert list(view.shown().verb) == ["pause"]
    admin.pause(conn, Q)
    view.refresh_button.click()
    assert list(view.shown().verb) == ["pause", "pause"] and view.verb.value == "pause"
    assert "audit mailers" in view.static_text()


def test_the_audit_view_reads_every_queue_on_a_read_only_session(conn):
    admin.pause(conn, "a")
    admin.pause(conn, "b")
    watching = emq.Connection(conn.client, conn.label, read_only=True)
    view = AuditView(watching)
    assert sorted(view.entries.queue) == ["a", "b"]
    assert conn.client.xlen("emq:audit:{a}") == 1  # reading wrote nothing
