"""Refresher (emq_notebook/widgets/refresher.py) through a panel's auto-refresh, on both
backends: one thread per panel, whatever the toggle is clicked. (A refresher that fails:
test_widgets.py.)"""

from panels import emq_threads

from emq_notebook.widgets import (
    QueuePanel,
)

Q = "mail"


def test_auto_refresh_is_one_thread_per_panel(conn):
    panel = QueuePanel(conn, Q, refresh_every=0.5, auto=True)
    for on in (False, True, False, True, True):
        panel.auto.value = on
    assert len([t for t in emq_threads() if t.name == f"emq-refresh-{Q}"]) == 1
    panel.close()
    assert not emq_threads()
