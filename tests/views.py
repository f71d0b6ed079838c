"""What the MetricsView and HealthView tests share: a queue with work done, and no panel
thread left after a test."""

import threading

import pytest
from helpers import worked

from emq_notebook.widgets.base import close_all

Q = "mail"


def threads(prefix="emq-"):
    return sorted(t.name for t in threading.enumerate() if t.name.startswith(prefix))


@pytest.fixture
def no_panel_left():
    yield
    close_all()
    assert threads() == []


def work(conn, q=Q, n=4, fail=0):
    worked(conn, q, n, fail)
