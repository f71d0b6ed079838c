"""The live views: a queue's events, its panels, and the dashboard of every queue.

Each reads only; a panel's buttons write through the verbs they call, each refused
on a read-only connection. A shell session has no widget to show: these verbs are a
usage error there.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from ..grammar import seconds
from ..registry import arg, opt, verb
from .session import QUEUE, Session


@verb(
    "watch",
    "live events of a queue",
    QUEUE,
    opt("--seconds", type=seconds, default=None, help="stop after N seconds (the shell waits 10s)"),
)
def _watch(s: Session, ns: Namespace) -> Any:
    from ..widgets import EventsView

    return s.widget(lambda: EventsView(s.conn, ns.queue, seconds=ns.seconds))


@verb(
    "panel",
    "the queue panel (with an id: the job panel; --dead: dead letters)",
    QUEUE,
    arg("id", nargs="?"),
    opt("--dead", action="store_true"),
)
def _panel(s: Session, ns: Namespace) -> Any:
    from .. import widgets

    if ns.dead:
        return s.widget(lambda: widgets.DeadLetterPanel(s.conn, ns.queue))
    if ns.id:
        return s.widget(lambda: widgets.JobPanel(s.conn, ns.queue, ns.id))
    return s.widget(lambda: widgets.QueuePanel(s.conn, ns.queue, refresh_every=s.settings.refresh_s))


@verb(
    "dashboard",
    "every queue at a glance; click one to open its tabs",
    arg("queue", nargs="?", help="open this queue's tabs at once"),
)
def _dashboard(s: Session, ns: Namespace) -> Any:
    from ..widgets import Dashboard

    return s.widget(
        lambda: Dashboard(
            s.conn, refresh_every=s.settings.refresh_s, queue=ns.queue, confirm_above=s.settings.confirm_above
        )
    )
